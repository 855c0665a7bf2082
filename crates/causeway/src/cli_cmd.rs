//! `causeway cli --addr HOST:PORT [-c "cmd; cmd; ..."]`: a shell on one session of a DC.
//!
//! Commands: `begin [strong]`, `get KEY...`, `set KEY VALUE`, `incr KEY [N]`,
//! `sadd KEY V...`, `srem KEY V...`, `smembers KEY`, `commit`, `abort`, `token`,
//! `attach HEX`, `barrier`, `help`. A data command outside a transaction runs in its own
//! (begin ... commit). With `-c` the commands run in order and the first error stops the
//! script with exit status 1; without it, commands are read line by line from stdin.
//! Either way, input that ends inside a transaction aborts it and exits with status 1.

use causeway_client::{from_hex, to_hex, Client, ClientError};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Error, Key, ObjValue, TxnKind};
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

#[derive(Args)]
pub struct CliArgs {
    /// The DC's client endpoint, e.g. 127.0.0.1:7101.
    #[arg(long, default_value = "127.0.0.1:7101")]
    addr: String,
    /// Commands separated by ';' to run instead of the interactive shell.
    #[arg(short = 'c')]
    commands: Option<String>,
    /// The server's password (the cluster file's `password`); default: the environment
    /// variable CAUSEWAY_PASSWORD, which keeps it out of the process list.
    #[arg(long)]
    password: Option<String>,
    /// Connect with TLS, trusting this CA certificate file (PEM; `causeway up --tls`
    /// writes DIR/tls/ca.pem).
    #[arg(long, value_name = "CA_FILE")]
    tls_ca: Option<std::path::PathBuf>,
}

/// The environment variable `causeway cli` takes the password from.
const PASSWORD_ENV: &str = "CAUSEWAY_PASSWORD";

const HELP: &str = "commands: begin [strong] | get KEY... | set KEY VALUE | incr KEY [N] | sadd KEY V... | srem KEY V... | smembers KEY | commit | abort | token | attach HEX | barrier | help";

struct Shell {
    client: Client,
    in_txn: bool,
}

fn usage(what: &str) -> String {
    format!("usage: {what}")
}

impl Shell {
    /// Runs one command line; returns what to print.
    fn exec(&mut self, line: &str) -> Result<String, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((cmd, rest)) = words.split_first() else {
            return Ok(String::new());
        };
        match cmd.to_ascii_lowercase().as_str() {
            "help" => Ok(HELP.to_string()),
            "begin" => {
                let kind = match rest {
                    [] => TxnKind::Causal,
                    ["strong"] => TxnKind::Strong,
                    _ => return Err(usage("begin [strong]")),
                };
                let txn = self.client.begin_kind(kind).map_err(|e| e.to_string())?;
                self.in_txn = true;
                Ok(format!("begun {txn}"))
            }
            "commit" => self.end(|c| c.commit(), "committed"),
            "abort" => self.end(|c| c.abort(), "aborted"),
            "token" => Ok(to_hex(&self.client.token().map_err(|e| e.to_string())?)),
            "attach" => {
                let [hex] = rest else {
                    return Err(usage("attach HEX"));
                };
                let token = from_hex(hex).ok_or("the token is not hex")?;
                self.client.attach(token).map_err(|e| e.to_string())?;
                Ok("attached".into())
            }
            "barrier" => {
                self.client.barrier().map_err(|e| e.to_string())?;
                Ok("barrier done".into())
            }
            other => self.data(other, rest),
        }
    }

    fn end(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<(), ClientError>,
        done: &str,
    ) -> Result<String, String> {
        self.in_txn = false;
        f(&mut self.client).map_err(|e| e.to_string())?;
        Ok(done.to_string())
    }

    /// A data command, in its own transaction when none is open.
    fn data(&mut self, cmd: &str, args: &[&str]) -> Result<String, String> {
        let auto = !self.in_txn;
        if auto {
            self.client.begin().map_err(|e| e.to_string())?;
        }
        let out = self.data_in_txn(cmd, args);
        if auto {
            match &out {
                Ok(_) => self.client.commit().map_err(|e| e.to_string())?,
                Err(_) => {
                    let _ = self.client.abort();
                }
            }
        }
        out
    }

    fn data_in_txn(&mut self, cmd: &str, args: &[&str]) -> Result<String, String> {
        let c = &mut self.client;
        let err = |e: ClientError| e.to_string();
        match (cmd, args) {
            ("get", keys) if !keys.is_empty() => {
                let mut lines = Vec::new();
                for k in keys {
                    lines.push(format!("{k} = {}", get_any(c, k)?));
                }
                Ok(lines.join("\n"))
            }
            ("set", [k, v]) => c
                .set(*k, v.as_bytes().to_vec())
                .map(|op| format!("ok {op}"))
                .map_err(err),
            ("incr", [k, rest @ ..]) if rest.len() <= 1 => {
                let n = match rest.first() {
                    Some(n) => n.parse::<i64>().map_err(|_| usage("incr KEY [N]"))?,
                    None => 1,
                };
                c.update(*k, Update::Increment(n))
                    .map(|op| format!("ok {op}"))
                    .map_err(err)
            }
            ("sadd" | "srem", [k, values @ ..]) if !values.is_empty() => {
                for v in values {
                    let bytes = v.as_bytes().to_vec();
                    let update = if cmd == "sadd" {
                        Update::Add(bytes)
                    } else {
                        Update::Remove(bytes)
                    };
                    c.update(*k, update).map_err(err)?;
                }
                Ok(format!("ok {} updates", values.len()))
            }
            ("smembers", [k]) => Ok(show(&ObjValue::Set(c.members(*k).map_err(err)?))),
            ("get" | "set" | "incr" | "sadd" | "srem" | "smembers", _) => {
                Err(format!("wrong arguments to {cmd}; {HELP}"))
            }
            _ => Err(format!("unknown command '{cmd}'; {HELP}")),
        }
    }
}

/// Reads a key as a register, or as whatever type the server says it holds.
fn get_any(c: &mut Client, key: &str) -> Result<String, String> {
    let mut obj = ObjType::Lww;
    for _ in 0..2 {
        match c.read(vec![(Key::from(key), obj)]) {
            Ok(mut v) => return Ok(v.pop().map(|r| show(&r.value)).unwrap_or_default()),
            Err(ClientError::Server(Error::WrongType { expected, .. })) => obj = expected,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("the key changed type while reading".into())
}

fn text(v: &[u8]) -> String {
    causeway_core::ids::escape_bytes(v)
}

fn show(value: &ObjValue) -> String {
    match value {
        ObjValue::Lww(None) => "(nil)".into(),
        ObjValue::Lww(Some(v)) => text(v),
        ObjValue::Counter(n) => n.to_string(),
        ObjValue::Set(vs) | ObjValue::MvReg(vs) => {
            let items: Vec<String> = vs.iter().map(|v| text(v)).collect();
            format!("{{{}}}", items.join(", "))
        }
        ObjValue::Hash(pairs) => {
            let items: Vec<String> = pairs
                .iter()
                .map(|(f, v)| format!("{}: {}", text(f), text(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        ObjValue::List(vs) => {
            let items: Vec<String> = vs.iter().map(|v| text(v)).collect();
            format!("[{}]", items.join(", "))
        }
        ObjValue::ZSet(pairs) => {
            let items: Vec<String> = pairs
                .iter()
                .map(|(m, s)| format!("{}: {}", text(m), f64::from_bits(*s)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

pub fn run(args: CliArgs) -> ExitCode {
    let options = causeway_client::Options {
        password: args
            .password
            .clone()
            .or_else(|| std::env::var(PASSWORD_ENV).ok())
            .map(Into::into),
        tls_ca_file: args.tls_ca.clone(),
        retry_refused: false,
        ..Default::default()
    };
    let client = match Client::connect_with(args.addr.as_str(), options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut shell = Shell {
        client,
        in_txn: false,
    };
    match args.commands {
        Some(script) => run_script(&mut shell, &script),
        None => interactive(&mut shell),
    }
}

fn run_script(shell: &mut Shell, script: &str) -> ExitCode {
    for cmd in script.split(';').map(str::trim).filter(|c| !c.is_empty()) {
        match shell.exec(cmd) {
            Ok(out) => println!("{out}"),
            Err(e) => {
                eprintln!("error: {cmd}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    end_of_input(shell)
}

/// The end of the commands: a transaction still open is aborted and reported, with exit
/// status 1, rather than dropped with the connection as if nothing were wrong.
fn end_of_input(shell: &mut Shell) -> ExitCode {
    if !shell.in_txn {
        return ExitCode::SUCCESS;
    }
    let _ = shell.client.abort();
    eprintln!(
        "error: the commands ended inside a transaction (begin without commit or abort): \
         it was aborted, nothing of it took effect; end it with commit"
    );
    ExitCode::FAILURE
}

fn interactive(shell: &mut Shell) -> ExitCode {
    let tty = std::io::stdin().is_terminal();
    if tty {
        let w = shell.client.welcome();
        println!(
            "connected to {} ({}, {}), protocol {}, session {}; type help",
            w.cluster, w.dc, w.node, w.protocol, w.session.0
        );
    }
    let stdin = std::io::stdin();
    loop {
        if tty {
            print!("{}> ", if shell.in_txn { "txn" } else { "causeway" });
            let _ = std::io::stdout().flush();
        }
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return end_of_input(shell),
            Ok(_) => {}
        }
        match shell.exec(line.trim()) {
            Ok(out) if out.is_empty() => {}
            Ok(out) => println!("{out}"),
            Err(e) => println!("error: {e}"),
        }
    }
}
