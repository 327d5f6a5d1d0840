//! `daqtune man`: the manual page daqtune(8), section 8 as for an administration tool that
//! runs as root (the generated units and rules point at `daqtune(8)`). clap_mangen renders
//! the top command; each subcommand follows as a subsection with its synopsis and options,
//! so the page documents every flag `--help` does.

use crate::cli::Cli;
use clap::CommandFactory;
use std::io::Write;

/// The section the page is in, and the one the units' `Documentation=man:daqtune(8)` name.
pub const SECTION: &str = "8";

pub fn render(w: &mut dyn Write) -> std::io::Result<()> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone()).section(SECTION);
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    writeln!(w, ".SH COMMANDS")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("daqtune {}", sub.get_name());
        writeln!(w, ".SS \"{}\"", escape(&name))?;
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            writeln!(w, "{}", escape(&about.to_string()))?;
        }
        let man = clap_mangen::Man::new(sub.clone().bin_name(&name)).section(SECTION);
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut part)?;
        }
        // The subsection's own headings would end it: they become paragraph breaks.
        for line in String::from_utf8_lossy(&part).lines() {
            if line.starts_with(".SH") {
                writeln!(w, ".PP")?;
            } else {
                writeln!(w, "{line}")?;
            }
        }
    }
    man.render_extra_section(w)?;
    man.render_version_section(w)?;
    Ok(())
}

/// Text for roff: a backslash is written `\e`, and a line may not start with a control
/// character (`.` or `'`).
fn escape(s: &str) -> String {
    s.replace('\\', "\\e")
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_8_with_every_subcommand_and_its_options() {
        let mut page = Vec::new();
        render(&mut page).expect("render");
        let page = String::from_utf8(page).expect("utf-8");
        assert!(page.contains("\n.TH daqtune 8 "), "{}", &page[..200]);
        // Hidden subcommands (trial-verify, run by its unit) are left out, as render does.
        for sub in Cli::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
        {
            let want = format!(".SS \"daqtune {}\"", sub.get_name());
            assert!(page.contains(&want), "{want} missing");
        }
        // Options of subcommands, not only of the top command.
        for flag in ["fail\\-on", "nfd\\-expiry", "redact", "svg"] {
            assert!(page.contains(flag), "{flag} missing");
        }
        assert_eq!(escape(".x\\y"), "\\&.x\\ey");
    }
}
