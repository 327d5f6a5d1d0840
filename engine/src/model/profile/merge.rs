//! Reading a profile: each layer parsed against the schema, `extends:` chains merged as YAML
//! mappings (the child's keys win), the merged document read again and validated.

use super::{LoadedProfile, Profile, ProfileError, BUILTIN};
use std::path::Path;

pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(n, _)| *n)
}

fn builtin_source(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

fn yaml_error(file: &str, e: serde_yaml_ng::Error) -> ProfileError {
    let pos = e.location().map(|l| (l.line(), l.column()));
    // serde_yaml_ng prefixes messages with the path and position; keep the message part.
    let msg = e.to_string();
    let msg = match msg.split_once(" at line ") {
        Some((head, _)) => head.to_string(),
        None => msg,
    };
    let hint = unknown_field_hint(&msg);
    ProfileError::at(file, pos, format!("{msg}{hint}"))
}

/// serde's "unknown field `adress`, expected one of `a`, `b`" (or "expected `a`") names the
/// keys the schema knows at that place: the nearest of them, as "; did you mean `address`?".
fn unknown_field_hint(msg: &str) -> String {
    let Some(rest) = msg
        .split_once("unknown field `")
        .map(|(_, r)| r)
        .or_else(|| msg.split_once("unknown variant `").map(|(_, r)| r))
    else {
        return String::new();
    };
    let Some((word, expected)) = rest.split_once('`') else {
        return String::new();
    };
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    crate::model::suggest::hint(word, known)
}

/// Nesting depth a profile may have (block levels plus flow brackets).
pub const PROFILE_MAX_DEPTH: usize = 32;
/// Entries one list of a profile may have.
pub const PROFILE_MAX_ITEMS: usize = 4096;

/// Parse one document into a mapping value, after checking it against the schema.
fn parse_layer(file: &str, src: &str) -> Result<(Profile, serde_yaml_ng::Value), ProfileError> {
    // Bounded before the YAML parser sees it (a nesting bomb costs it seconds); real profiles
    // are at most five levels deep with lists of a few dozen entries.
    daqtune_probe::text::yaml_shape(src, PROFILE_MAX_DEPTH, PROFILE_MAX_ITEMS).map_err(|e| {
        ProfileError::at(
            file,
            Some((e.line, e.column)),
            format!("{} (a profile is refused past these bounds)", e.message),
        )
    })?;
    let typed: Profile = serde_yaml_ng::from_str(src).map_err(|e| yaml_error(file, e))?;
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(src).map_err(|e| yaml_error(file, e))?;
    if !value.is_mapping() && !value.is_null() {
        return Err(ProfileError::at(
            file,
            Some((1, 1)),
            "expected a mapping of profile keys",
        ));
    }
    Ok((typed, value))
}

/// `hugepages.pools` and `hugepages.size`/`count` are two ways to say one thing: the layer
/// about to be merged, when it gives one of them, replaces whatever the layers below gave of
/// the other; giving both in one layer is an error.
fn hugepage_layer(
    merged: &mut serde_yaml_ng::Value,
    layer: &serde_yaml_ng::Value,
    file: &str,
    src: &str,
) -> Result<(), ProfileError> {
    let Some(h) = layer.get("hugepages").and_then(|h| h.as_mapping()) else {
        return Ok(());
    };
    let has_pools = h.contains_key("pools");
    let has_single = h.contains_key("size") || h.contains_key("count");
    if has_pools && has_single {
        return Err(ProfileError::at(
            file,
            locate(src, &["hugepages", "pools"]),
            "give either `hugepages.pools` or `hugepages.size`/`count`, not both",
        ));
    }
    if let Some(base) = merged.get_mut("hugepages").and_then(|b| b.as_mapping_mut()) {
        if has_pools {
            base.remove("size");
            base.remove("count");
        } else if has_single {
            base.remove("pools");
        }
    }
    Ok(())
}

fn merge(base: &mut serde_yaml_ng::Value, over: serde_yaml_ng::Value) {
    use serde_yaml_ng::Value;
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Load a profile by built-in name or file path.
pub fn load(name_or_path: &str) -> Result<LoadedProfile, ProfileError> {
    let (file, src) = if let Some(src) = builtin_source(name_or_path) {
        (format!("platforms/{name_or_path}.yaml"), src.to_string())
    } else {
        let p = Path::new(name_or_path);
        let src = daqtune_probe::fsutil::read_user_file(p).map_err(|e| {
            let known: Vec<&str> = builtin_names().collect();
            ProfileError {
                file: name_or_path.into(),
                line: 0,
                column: 0,
                message: format!(
                    "cannot read profile ({e}); built-in profiles are: {}{}",
                    known.join(", "),
                    crate::model::suggest::hint(name_or_path, known.iter().copied())
                ),
            }
        })?;
        (name_or_path.to_string(), src)
    };
    load_source(&file, &src)
}

pub fn load_source(file: &str, src: &str) -> Result<LoadedProfile, ProfileError> {
    // A byte-order mark (editors on Windows save one) is no content: the YAML reader took it
    // for a document of its own ("more than one document").
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    let mut layers = vec![(file.to_string(), src.to_string())];
    let (typed, value) = parse_layer(file, src)?;
    let mut chain = vec![value];
    let mut parent = typed.extends.clone();
    let mut seen = vec![typed.name.clone()];
    while let Some(pname) = parent {
        if seen.contains(&pname) || seen.len() > 16 {
            let pos = locate(src, &["extends"]);
            return Err(ProfileError::at(
                file,
                pos,
                format!("`extends: {pname}` forms a cycle"),
            ));
        }
        let Some(psrc) = builtin_source(&pname) else {
            let pos = locate(
                &layers.last().map(|l| l.1.clone()).unwrap_or_default(),
                &["extends"],
            );
            let known: Vec<&str> = builtin_names().collect();
            return Err(ProfileError::at(
                &layers.last().map(|l| l.0.clone()).unwrap_or_default(),
                pos,
                format!(
                    "unknown profile `{pname}` in extends (expected one of: {})",
                    known.join(", ")
                ),
            ));
        };
        let pfile = format!("platforms/{pname}.yaml");
        let (ptyped, pvalue) = parse_layer(&pfile, psrc)?;
        layers.push((pfile, psrc.to_string()));
        chain.push(pvalue);
        seen.push(pname);
        parent = ptyped.extends.clone();
    }
    let mut merged = serde_yaml_ng::Value::Mapping(Default::default());
    for (v, (lfile, lsrc)) in chain.into_iter().zip(layers.iter()).rev() {
        hugepage_layer(&mut merged, &v, lfile, lsrc)?;
        merge(&mut merged, v);
    }
    let profile: Profile = serde_yaml_ng::from_value(merged).map_err(|e| yaml_error(file, e))?;
    let mut loaded = LoadedProfile {
        profile,
        layers,
        origin: format!("given as {file}"),
        deprecations: Vec::new(),
    };
    loaded.validate()?;
    loaded.map_legacy_floor();
    Ok(loaded)
}
/// Find the line and column of a nested mapping key in block-style YAML.
pub fn locate(src: &str, path: &[&str]) -> Option<(usize, usize)> {
    if path.is_empty() {
        return Some((1, 1));
    }
    let mut depth = 0usize;
    let mut min_indent: Option<usize> = None;
    let mut found = None;
    for (i, line) in src.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if let Some(mi) = min_indent {
            if indent < mi && depth > 0 {
                // Left the parent mapping without finding the key.
                return found;
            }
        }
        let key = path[depth];
        let matches = trimmed
            .strip_prefix(key)
            .is_some_and(|r| r.starts_with(':'));
        if matches && min_indent.is_none_or(|mi| indent >= mi) {
            found = Some((i + 1, indent + 1));
            depth += 1;
            if depth == path.len() {
                return found;
            }
            min_indent = Some(indent + 1);
        }
    }
    found
}
