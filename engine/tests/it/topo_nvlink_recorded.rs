//! Issue 30: the snapshots taken on the lent multi-GPU machines replay the matrix
//! `nvidia-smi topo -m` printed on them, cell for cell for GPU<->GPU, and each GPU's CPU and
//! NUMA affinity. The recorded files are in docs/validation-data/nvlink-*/ (`snapshot.tar.zst`,
//! `nvsmi-topo-m.txt`, `nvsmi-gpus.csv`); docs/validation.md says how they were taken.

use daqtune_engine::hostroot::open_root;
use daqtune_engine::topo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `nvidia-smi topo -m`: (GPU label -> (column label -> cell), GPU label -> (CPU, NUMA)).
type Parsed = (
    BTreeMap<String, BTreeMap<String, String>>,
    BTreeMap<String, (String, String)>,
);

fn strip_escapes(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn parse_nvsmi(text: &str) -> Parsed {
    let text = strip_escapes(text);
    let lines: Vec<&str> = text.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.trim_start().starts_with("GPU0"))
        .expect("header");
    let devs: Vec<String> = lines[head]
        .split('\t')
        .map(str::trim)
        .filter(|c| {
            (c.starts_with("GPU") || c.starts_with("NIC"))
                && c[3..].chars().all(|d| d.is_ascii_digit())
                && c.len() > 3
        })
        .map(str::to_string)
        .collect();
    let (mut cells, mut aff) = (BTreeMap::new(), BTreeMap::new());
    for l in &lines[head + 1..] {
        if l.trim().is_empty() {
            break;
        }
        let f: Vec<&str> = l.split('\t').collect();
        let row = f[0].trim().to_string();
        let m: BTreeMap<String, String> = devs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.clone(), f[1 + i].trim().to_string()))
            .collect();
        let rest: Vec<&str> = f[1 + devs.len()..]
            .iter()
            .map(|x| x.trim())
            .filter(|x| !x.is_empty())
            .collect();
        if row.starts_with("GPU") {
            aff.insert(row.clone(), (rest[0].to_string(), rest[1].to_string()));
        }
        cells.insert(row, m);
    }
    (cells, aff)
}

/// NVML's `00000000:00:06.0` in sysfs form.
fn norm_bus(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    let (dom, rest) = s.split_once(':').expect("bus id");
    format!(
        "{:04x}:{rest}",
        u32::from_str_radix(dom, 16).expect("domain")
    )
}

fn recorded() -> Vec<PathBuf> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/validation-data");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&base)
        .expect("validation data")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("nvlink-"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn recorded_multi_gpu_roots_replay_nvidia_smi_topo() {
    let dirs = recorded();
    assert!(
        dirs.len() >= 2,
        "the 2- and 4-GPU recordings are missing: {dirs:?}"
    );
    for dir in dirs {
        let host = open_root(Some(&dir.join("snapshot.tar.zst"))).expect("snapshot opens");
        let (tree, nics) = topo::gather(&host, false).expect("pci");
        let nv = topo::read_nvlink(&host, &tree);
        let t = topo::build_with(&tree, &nics, &nv);
        let smi = std::fs::read_to_string(dir.join("nvsmi-topo-m.txt")).expect("nvsmi");
        let (cells, aff) = parse_nvsmi(&smi);
        let csv = std::fs::read_to_string(dir.join("nvsmi-gpus.csv")).expect("csv");
        let bus: BTreeMap<String, String> = csv
            .lines()
            .filter_map(|l| {
                let mut f = l.split(',');
                Some((format!("GPU{}", f.next()?.trim()), norm_bus(f.next()?)))
            })
            .collect();
        let at = |g: &str| -> usize {
            t.endpoints
                .iter()
                .position(|e| e.kind == "gpu" && e.addr.to_string() == bus[g])
                .unwrap_or_else(|| panic!("{}: {g} not in daqtune's matrix", dir.display()))
        };
        let gpus: Vec<&String> = aff.keys().collect();
        assert!(gpus.len() >= 2, "{}", dir.display());
        for a in &gpus {
            for b in &gpus {
                if a == b {
                    continue;
                }
                assert_eq!(
                    t.matrix[at(a)][at(b)],
                    cells[*a][*b],
                    "{}: {a}-{b}",
                    dir.display()
                );
            }
            let e = &t.endpoints[at(a)];
            assert_eq!(
                (
                    e.cpu_affinity.clone().unwrap_or_else(|| "N/A".into()),
                    e.numa_affinity.clone()
                ),
                aff[*a],
                "{}: {a} affinity",
                dir.display()
            );
        }
    }
}
