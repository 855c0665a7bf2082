//! The command reference, `docs/CLI.md`, rendered from the clap definitions of every
//! subcommand and flag, wrapped at [`WIDTH_MAX`] columns. A test compares the file with
//! what the definitions render and fails when they differ;
//! `CAUSEWAY_BLESS=1 cargo test --workspace --release cli_reference` rewrites it.

use clap::{Arg, Command, CommandFactory};

/// Widest line the reference holds (the project's documents stay under 100 columns).
pub(crate) const WIDTH_MAX: usize = 99;

/// The whole reference, as `docs/CLI.md` holds it.
pub(crate) fn reference() -> String {
    let mut cli = crate::Cli::command();
    cli.build();
    let mut out = String::from("# Command reference\n\n");
    out += &wrap(
        "Every `causeway` subcommand and flag, generated from the CLI's own definitions \
         (`causeway SUBCOMMAND --help` prints the same). Do not edit: a test fails when this \
         file and the definitions differ, and `CAUSEWAY_BLESS=1 cargo test --workspace \
         --release cli_reference` rewrites it.",
        "",
    );
    out += "\n";
    for sub in visible(&cli) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        out += &wrap(
            &format!(
                "- [`{}`](#causeway-{}): {about}",
                sub.get_name(),
                sub.get_name()
            ),
            "  ",
        );
    }
    for sub in visible(&cli) {
        out += "\n";
        render_command(&mut out, sub);
    }
    out
}

fn visible(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

fn render_command(out: &mut String, cmd: &Command) {
    *out += &format!("## causeway {}\n\n", cmd.get_name());
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        for paragraph in about.to_string().split("\n\n") {
            *out += &wrap(paragraph, "");
            *out += "\n";
        }
    }
    let name = format!("causeway {}", cmd.get_name());
    let usage = cmd.clone().bin_name(name).render_usage().to_string();
    *out += &format!("```\n{}\n```\n\n", usage.trim_start_matches("Usage: "));
    for arg in cmd.get_arguments() {
        if arg.is_hide_set() || ["help", "version"].contains(&arg.get_id().as_str()) {
            continue;
        }
        *out += &wrap(&bullet(arg), "  ");
    }
}

/// One flag: `- `--name <VALUE>`: help (default: `x`)`.
fn bullet(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .map(|names| names.join(" "))
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    let name = match (arg.get_long(), arg.get_short()) {
        (Some(long), _) if takes_value => format!("--{long} <{value}>"),
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) if takes_value => format!("-{short} <{value}>"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => format!("<{value}>"),
    };
    let help = arg.get_long_help().or(arg.get_help());
    let help = help.map(|h| h.to_string()).unwrap_or_default();
    let mut help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if takes_value && !choices.is_empty() {
        help = format!("{help} (one of {})", choices.join(", "));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    let default = match defaults.join(",").as_str() {
        "" | "false" => String::new(),
        d => format!(" (default: `{d}`)"),
    };
    match help.as_str() {
        "" => format!("- `{name}`{default}"),
        _ => format!("- `{name}`: {help}{default}"),
    }
}

/// `text` as lines of at most [`WIDTH_MAX`] columns (a longer word stands alone),
/// continuation lines starting with `indent`.
fn wrap(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > WIDTH_MAX {
            out += &line;
            out += "\n";
            line = indent.to_string();
        }
        if !line.is_empty() && line != indent {
            line += " ";
        }
        line += word;
    }
    out += &line;
    out += "\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CLI.md");

    #[test]
    fn cli_reference_matches_the_definitions() {
        let rendered = reference();
        if std::env::var_os("CAUSEWAY_BLESS").is_some() {
            std::fs::write(PATH, &rendered).expect("write docs/CLI.md");
        }
        let on_disk = std::fs::read_to_string(PATH).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "docs/CLI.md is out of date with the CLI's definitions: run \
             CAUSEWAY_BLESS=1 cargo test --workspace --release cli_reference"
        );
    }

    #[test]
    fn the_reference_names_every_subcommand_and_flag_within_the_width() {
        let text = reference();
        for name in [
            "sim", "bench", "check", "server", "up", "ctl", "cli", "load", "top",
        ] {
            assert!(text.contains(&format!("## causeway {name}\n")), "{name}");
        }
        for flag in [
            "`--protocol <PROTOCOL>`",
            "`--plan <all|P,P..>`",
            "`--quick`",
        ] {
            assert!(text.contains(flag), "{flag}");
        }
        assert!(text
            .lines()
            .all(|l| l.len() <= WIDTH_MAX || !l.contains(' ')));
    }

    #[test]
    fn wrap_breaks_at_the_width_and_indents() {
        let text = "word ".repeat(40);
        let wrapped = wrap(&text, "  ");
        assert!(wrapped.lines().count() > 1);
        assert!(wrapped.lines().all(|l| l.len() <= WIDTH_MAX));
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("  word")));
    }
}
