//! Control of a running `causeway up`: kill, start or restart one node or a whole DC by
//! name, and list the nodes' state (`causeway ctl --data DIR COMMAND [TARGET]`).
//!
//! `up` listens on a Unix socket in its data directory (`up.sock`, reachable only through
//! the file system, so only users who can read the data directory can drive it). A request
//! is one line (`kill dc2`, `restart dc1-n0`, `start dc2`, `status`) of at most
//! [`REQUEST_LEN_MAX`] bytes; the answer is some lines of text, the first `ok` or `error:`.
//! A node killed through `ctl` stays dead (no automatic restart) until `start` or
//! `restart` names it: failure experiments decide when it comes back.

use super::{spawn_node, write_pids, NodeProc};
use clap::{Args, ValueEnum};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The control socket in the data directory.
pub const SOCKET_FILE: &str = "up.sock";
/// The longest request line accepted.
pub const REQUEST_LEN_MAX: usize = 256;
/// How long `ctl` waits for `up` to answer (a restart spawns processes).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CtlCommand {
    /// SIGKILL the node(s) and leave them dead until `start` or `restart`.
    Kill,
    /// Start the node(s) that are dead (killed, or waiting for a restart).
    Start,
    /// SIGKILL the running node(s), then start them at once.
    Restart,
    /// One line per node: name, DC, pid, state, restarts.
    Status,
}

#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The data directory `causeway up` runs in.
    #[arg(long, default_value = "causeway-data")]
    data: PathBuf,
    /// What to do with the target.
    command: CtlCommand,
    /// A node name (`dc1-n0`) or a DC name (`dc2`: all its nodes); not for `status`.
    target: Option<String>,
}

/// `causeway ctl`: sends one request to the `up` running in `--data` and prints the answer.
pub fn run(args: CtlArgs) -> ExitCode {
    let line = match request_line(args.command, args.target.as_deref()) {
        Ok(line) => line,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match send(&args.data.join(SOCKET_FILE), &line) {
        Ok(answer) => {
            print!("{answer}");
            if answer.starts_with("ok") {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn request_line(command: CtlCommand, target: Option<&str>) -> Result<String, String> {
    let verb = command
        .to_possible_value()
        .expect("every command has a name")
        .get_name()
        .to_string();
    match (command, target) {
        (CtlCommand::Status, None) => Ok(verb),
        (CtlCommand::Status, Some(_)) => Err("status takes no target".into()),
        (_, None) => Err(format!("{verb} needs a node or DC name")),
        (_, Some(t)) if t.len() > REQUEST_LEN_MAX / 2 || t.contains(char::is_whitespace) => {
            Err(format!("{t:?} is not a node or DC name"))
        }
        (_, Some(t)) => Ok(format!("{verb} {t}")),
    }
}

fn send(socket: &Path, line: &str) -> Result<String, String> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).map_err(|e| {
        format!(
            "no causeway up answers at {} ({e}); fix: pass the --data directory of a running up",
            socket.display()
        )
    })?;
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut answer = String::new();
    stream
        .take(1 << 16)
        .read_to_string(&mut answer)
        .map_err(|e| format!("no answer from causeway up: {e}"))?;
    Ok(answer)
}

/// Binds the control socket (replacing a stale one left by an `up` that was killed).
pub(super) fn bind(data: &Path) -> Result<tokio::net::UnixListener, String> {
    let path = data.join(SOCKET_FILE);
    let _ = std::fs::remove_file(&path);
    tokio::net::UnixListener::bind(&path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))
}

/// Reads one request from a `ctl` connection, carries it out and answers.
pub(super) async fn serve_one(
    stream: tokio::net::UnixStream,
    nodes: &mut [NodeProc],
    config_path: &Path,
    data: &Path,
) {
    let mut stream = stream.into_std().ok();
    let Some(std_stream) = stream.as_mut() else {
        return;
    };
    // The request is one short line; a client that does not send it within a second is
    // dropped so it cannot stall the supervisor.
    let _ = std_stream.set_nonblocking(false);
    let _ = std_stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut line = String::new();
    let read = BufReader::new(std_stream.take(REQUEST_LEN_MAX as u64)).read_line(&mut line);
    let answer = match read {
        Ok(_) => handle(line.trim(), nodes, config_path, data),
        Err(e) => format!("error: cannot read the request: {e}\n"),
    };
    let _ = std_stream.write_all(answer.as_bytes());
}

/// Carries out one request line; the answer text.
pub(super) fn handle(
    line: &str,
    nodes: &mut [NodeProc],
    config_path: &Path,
    data: &Path,
) -> String {
    let mut words = line.split_whitespace();
    let (verb, target) = (words.next().unwrap_or(""), words.next());
    if words.next().is_some() {
        return "error: one command and at most one target per request\n".into();
    }
    if verb == "status" {
        return status(nodes);
    }
    if !["kill", "start", "restart"].contains(&verb) {
        return format!("error: unknown command {verb:?} (kill, start, restart, status)\n");
    }
    let Some(target) = target else {
        return format!("error: {verb:?} needs a target\n");
    };
    let chosen: Vec<usize> = (0..nodes.len())
        .filter(|&k| nodes[k].name == target || nodes[k].dc == target)
        .collect();
    if chosen.is_empty() {
        return format!("error: no node or DC is named {target:?}\n");
    }
    let mut out = String::from("ok\n");
    for k in chosen {
        let node = &mut nodes[k];
        match verb {
            "kill" => out += &kill(node),
            "start" => out += &start(node, config_path, data),
            _ => {
                out += &kill(node);
                out += &start(node, config_path, data);
            }
        }
    }
    if let Err(e) = write_pids(data, nodes) {
        out += &format!("warning: {e}\n");
    }
    out
}

/// SIGKILLs a running node, reaps it and holds it dead.
fn kill(node: &mut NodeProc) -> String {
    node.held = true;
    node.restart_at = None;
    if node.exited.is_some() {
        return format!("{} was not running\n", node.name);
    }
    let pid = node.child.id();
    let _ = node.child.kill();
    match node.child.wait() {
        Ok(status) => node.exited = Some(status),
        Err(e) => return format!("{} (pid {pid}): cannot reap it: {e}\n", node.name),
    }
    eprintln!(
        "node {} of DC {} killed (pid {pid}) by ctl",
        node.name, node.dc
    );
    format!("{} killed (pid {pid})\n", node.name)
}

/// Starts a dead node now and lets the supervisor restart it again if it dies.
fn start(node: &mut NodeProc, config_path: &Path, data: &Path) -> String {
    if node.exited.is_none() {
        return format!(
            "{} is already running (pid {})\n",
            node.name,
            node.child.id()
        );
    }
    match spawn_node(config_path, data, &node.name) {
        Ok(child) => {
            node.child = child;
            node.exited = None;
            node.held = false;
            node.restart_at = None;
            node.started = Instant::now();
            eprintln!(
                "node {} of DC {} started (pid {}) by ctl",
                node.name,
                node.dc,
                node.child.id()
            );
            format!("{} started (pid {})\n", node.name, node.child.id())
        }
        Err(e) => format!("{}: {e}\n", node.name),
    }
}

fn status(nodes: &[NodeProc]) -> String {
    let mut out = String::from("ok\n");
    for node in nodes {
        let (pid, state) = match (node.exited, node.held, node.restart_at) {
            (None, _, _) => (node.child.id().to_string(), "up".to_string()),
            (Some(_), true, _) => ("-".into(), "killed".into()),
            (Some(_), false, Some(at)) => (
                "-".into(),
                format!(
                    "restarting in {} ms",
                    at.saturating_duration_since(Instant::now()).as_millis()
                ),
            ),
            (Some(status), false, None) => ("-".into(), format!("exited ({status})")),
        };
        out += &format!(
            "{} {} {pid} {state} restarts={}\n",
            node.name, node.dc, node.restarts
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_name_one_target() {
        assert_eq!(
            request_line(CtlCommand::Kill, Some("dc2")).unwrap(),
            "kill dc2"
        );
        assert_eq!(request_line(CtlCommand::Status, None).unwrap(), "status");
        assert!(request_line(CtlCommand::Start, None).is_err());
        assert!(request_line(CtlCommand::Status, Some("dc1")).is_err());
        assert!(request_line(CtlCommand::Kill, Some("dc1 dc2")).is_err());
        assert!(request_line(CtlCommand::Kill, Some(&"x".repeat(200))).is_err());
    }

    #[test]
    fn unknown_targets_and_commands_are_refused() {
        let path = Path::new("/nonexistent");
        let answer = handle("kill dc9", &mut [], path, path);
        assert!(answer.starts_with("error: no node or DC"), "{answer}");
        let answer = handle("kill dc1 dc2", &mut [], path, path);
        assert!(answer.starts_with("error: one command"), "{answer}");
        let answer = handle("start", &mut [], path, path);
        assert!(answer.starts_with("error:"), "{answer}");
        let answer = handle("stop dc1", &mut [], path, path);
        assert!(answer.starts_with("error: unknown command"), "{answer}");
        assert_eq!(handle("status", &mut [], path, path), "ok\n");
    }
}
