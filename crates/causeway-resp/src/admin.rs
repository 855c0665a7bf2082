//! Connection-management commands, answered by the front end without a transaction:
//! `HELLO`, `AUTH`, `CLIENT`, `SELECT`, `QUIT`, `INFO`, `COMMAND`, `CONFIG GET` and
//! `CLUSTER` (in `cluster`).

use crate::commands::{Spec, COMMANDS};
use crate::conn::{arity_error, Conn, Outcome};
use crate::limits::CLIENT_NAME_LEN_MAX;
use crate::parse::parse_i64;
use crate::reply::{Proto, Reply};
use crate::session::{SessionFactory, SessionHandle};
use bytes::Bytes;
use causeway_core::SessionScope;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// The Redis version whose command semantics the front end follows (clients read it from
/// `HELLO` and `INFO`).
pub const REDIS_VERSION: &str = "7.0.0";

/// Answers a connection command (`PING` and `ECHO` go through the data path).
pub async fn connection<F: SessionFactory>(
    conn: &mut Conn<F>,
    spec: &Spec,
    args: &[Bytes],
) -> Outcome {
    let reply = match spec.name {
        "QUIT" => {
            return Outcome {
                reply: Reply::Ok,
                close: true,
            }
        }
        "HELLO" => hello(conn, args),
        "AUTH" => auth(conn, args),
        "CLIENT" => client(conn, args),
        "SELECT" => select(&args[1]),
        "INFO" => info(conn, &args[1..]),
        "COMMAND" => command(args),
        "CONFIG" => config(args),
        "CLUSTER" => crate::cluster::cluster(conn.shared().factory.cluster(), args),
        other => Reply::err(format!("'{other}' is not a connection command")),
    };
    reply.into()
}

fn upper(arg: &Bytes) -> String {
    String::from_utf8_lossy(arg).to_ascii_uppercase()
}

/// Compares without an early exit on the first differing byte.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks a user name and password against the configuration; authenticates on success.
fn authenticate<F: SessionFactory>(
    conn: &mut Conn<F>,
    user: Option<&Bytes>,
    pass: &Bytes,
) -> Result<(), Reply> {
    let user_ok = user.is_none_or(|u| u.as_ref() == b"default");
    let pass_ok = match &conn.shared().password {
        Some(expected) => same_secret(expected.as_bytes(), pass),
        None if user.is_none() => {
            return Err(Reply::err(
                "AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?",
            ))
        }
        None => true,
    };
    if user_ok && pass_ok {
        conn.authenticated();
        Ok(())
    } else {
        Err(Reply::Error(
            "WRONGPASS invalid username-password pair or user is disabled.".into(),
        ))
    }
}

/// `AUTH [username] password`.
fn auth<F: SessionFactory>(conn: &mut Conn<F>, args: &[Bytes]) -> Reply {
    let result = match args.len() {
        2 => authenticate(conn, None, &args[1]),
        3 => authenticate(conn, Some(&args[1]), &args[2]),
        _ => Err(Reply::err("syntax error")),
    };
    result.map_or_else(|e| e, |()| Reply::Ok)
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
fn hello<F: SessionFactory>(conn: &mut Conn<F>, args: &[Bytes]) -> Reply {
    let proto = match args.get(1).map(|a| parse_i64(a)) {
        None => conn.proto,
        Some(Some(2)) => Proto::Resp2,
        Some(Some(3)) => Proto::Resp3,
        Some(Some(_)) => return Reply::Error("NOPROTO unsupported protocol version".into()),
        Some(None) => return Reply::err("Protocol version is not an integer or out of range"),
    };
    let mut name = None;
    let mut i = 2;
    while i < args.len() {
        match upper(&args[i]).as_str() {
            "AUTH" if i + 2 < args.len() => {
                if let Err(e) = authenticate(conn, Some(&args[i + 1]), &args[i + 2]) {
                    return e;
                }
                i += 3;
            }
            "SETNAME" if i + 1 < args.len() => {
                name = Some(args[i + 1].clone());
                i += 2;
            }
            _ => {
                return Reply::err(format!(
                    "syntax error in HELLO option '{}'",
                    upper(&args[i])
                ))
            }
        }
    }
    if !conn.is_authed() {
        return Reply::Error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time"
                .into(),
        );
    }
    if let Some(name) = name {
        if let Err(e) = set_name(conn, name) {
            return e;
        }
    }
    conn.proto = proto;
    hello_map(conn)
}

fn hello_map<F: SessionFactory>(conn: &Conn<F>) -> Reply {
    let info = conn.shared().factory.info();
    let proto = match conn.proto {
        Proto::Resp2 => 2,
        Proto::Resp3 => 3,
    };
    Reply::Map(vec![
        (Reply::text("server"), Reply::text("causeway")),
        (Reply::text("version"), Reply::text(REDIS_VERSION)),
        (Reply::text("proto"), Reply::Int(proto)),
        (Reply::text("id"), Reply::Int(conn.id as i64)),
        (Reply::text("mode"), Reply::text("standalone")),
        (Reply::text("role"), Reply::text("master")),
        (Reply::text("modules"), Reply::Array(Vec::new())),
        (Reply::text("causeway_protocol"), Reply::text(info.protocol)),
        (Reply::text("causeway_dc"), Reply::Int(i64::from(info.dc))),
    ])
}

/// Sets (or, with an empty name, clears) the connection's name.
fn set_name<F: SessionFactory>(conn: &mut Conn<F>, name: Bytes) -> Result<(), Reply> {
    if name.len() > CLIENT_NAME_LEN_MAX {
        return Err(Reply::err(format!(
            "client names are limited to {CLIENT_NAME_LEN_MAX} bytes"
        )));
    }
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Reply::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    conn.name = if name.is_empty() { None } else { Some(name) };
    Ok(())
}

/// `CLIENT SESSION [ENDPOINT | CONNECTION]`: the connection's session scope, or a switch
/// of it (docs/REDIS.md, "Session scopes").
fn client_session<F: SessionFactory>(conn: &mut Conn<F>, scope: Option<&Bytes>) -> Reply {
    let Some(arg) = scope else {
        return Reply::Bulk(Bytes::from_static(conn.handle().scope().name().as_bytes()));
    };
    let Some(scope) = SessionScope::parse(&String::from_utf8_lossy(arg)) else {
        return Reply::err("CLIENT SESSION takes ENDPOINT or CONNECTION");
    };
    if conn.handle_mut().set_scope(scope) {
        Reply::Ok
    } else {
        Reply::err(format!("this server has no {} session scope", scope.name()))
    }
}

/// `CLIENT ID | SETNAME name | GETNAME | SETINFO attr value | INFO | SESSION [scope]`.
fn client<F: SessionFactory>(conn: &mut Conn<F>, args: &[Bytes]) -> Reply {
    let sub = upper(&args[1]);
    match (sub.as_str(), args.len()) {
        ("SESSION", 2 | 3) => client_session(conn, args.get(2)),
        ("ID", 2) => Reply::Int(conn.id as i64),
        ("SETNAME", 3) => set_name(conn, args[2].clone()).map_or_else(|e| e, |()| Reply::Ok),
        ("GETNAME", 2) => conn.name.clone().map_or(Reply::Nil, Reply::Bulk),
        ("SETINFO", 4) => Reply::Ok,
        ("INFO", 2) => {
            let name = conn.name.as_deref().unwrap_or_default();
            let resp = if conn.proto == Proto::Resp3 { 3 } else { 2 };
            let line = format!(
                "id={} name={} db=0 resp={resp} session={}\n",
                conn.id,
                String::from_utf8_lossy(name),
                conn.handle().scope().name()
            );
            Reply::Verbatim(line)
        }
        ("ID" | "SETNAME" | "GETNAME" | "SETINFO" | "INFO" | "SESSION", _) => {
            arity_error(&format!("client|{}", sub.to_ascii_lowercase()))
        }
        _ => Reply::err(format!(
            "unknown subcommand '{}'. Try CLIENT ID, SETNAME, GETNAME, SETINFO, INFO or SESSION.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

/// `SELECT 0`: Causeway has one keyspace.
fn select(index: &Bytes) -> Reply {
    match parse_i64(index) {
        Some(0) => Reply::Ok,
        Some(_) => Reply::err("DB index is out of range (Causeway has only database 0)"),
        None => Reply::err("value is not an integer or out of range"),
    }
}

/// `INFO [section ...]`: sections `server`, `clients`, `causeway`, `keyspace`.
fn info<F: SessionFactory>(conn: &Conn<F>, sections: &[Bytes]) -> Reply {
    let wanted: Vec<String> = sections
        .iter()
        .map(|s| upper(s).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| matches!(w.as_str(), "all" | "default" | "everything"));
    let show = |name: &str| all || wanted.iter().any(|w| w == name);
    let mut text = String::new();
    if show("server") {
        text.push_str(&format!(
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_mode:standalone\r\n\
             causeway_version:{}\r\nprocess_id:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::process::id()
        ));
    }
    if show("clients") {
        let clients = conn.shared().clients.load(Ordering::Relaxed);
        text.push_str(&format!("# Clients\r\nconnected_clients:{clients}\r\n\r\n"));
    }
    if show("causeway") {
        causeway_section(conn, &mut text);
    }
    if show("keyspace") {
        text.push_str("# Keyspace\r\n\r\n");
    }
    Reply::Verbatim(text)
}

/// The `# Causeway` section: protocol, DCs and every gauge of the host.
fn causeway_section<F: SessionFactory>(conn: &Conn<F>, text: &mut String) {
    let info = conn.shared().factory.info();
    let _ = write!(
        text,
        "# Causeway\r\nprotocol:{}\r\ndc:{}\r\ndcs:{}\r\ndc_count:{}\r\n",
        info.protocol,
        info.dc,
        info.dcs.join(","),
        info.dcs.len()
    );
    gauge_lines(info.gauges, text);
    text.push_str("\r\n");
}

/// One `name:value` line per gauge, sorted by name so the output does not depend on the
/// order a host reports them in (whatever the protocol, no gauge is singled out).
fn gauge_lines(mut gauges: Vec<(String, f64)>, text: &mut String) {
    gauges.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, value) in gauges {
        let _ = write!(text, "{name}:{value}\r\n");
    }
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND DOCS [name ...]`, `COMMAND INFO [name ...]`,
/// `COMMAND LIST`.
fn command(args: &[Bytes]) -> Reply {
    let Some(sub) = args.get(1).map(upper) else {
        return Reply::Array(COMMANDS.iter().map(Spec::info).collect());
    };
    let named = |rest: &[Bytes]| -> Vec<Option<&'static Spec>> {
        if rest.is_empty() {
            COMMANDS.iter().map(Some).collect()
        } else {
            rest.iter().map(|n| crate::commands::lookup(n)).collect()
        }
    };
    match sub.as_str() {
        "COUNT" => Reply::Int(COMMANDS.len() as i64),
        "LIST" => Reply::Array(
            COMMANDS
                .iter()
                .map(|s| Reply::text(s.lower_name()))
                .collect(),
        ),
        "INFO" => Reply::Array(
            named(&args[2..])
                .into_iter()
                .map(|s| s.map_or(Reply::NilArray, Spec::info))
                .collect(),
        ),
        "DOCS" => Reply::Map(
            named(&args[2..])
                .into_iter()
                .flatten()
                .map(|s| {
                    let [name, docs] = s.docs();
                    (name, docs)
                })
                .collect(),
        ),
        _ => Reply::err(format!(
            "unknown subcommand '{}'. Try COMMAND COUNT, DOCS, INFO or LIST.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

/// The few settings tools ask for (`redis-benchmark` reads `save` and `appendonly`).
const CONFIG_VALUES: &[(&str, &str)] = &[("save", ""), ("appendonly", "no"), ("databases", "1")];

/// `CONFIG GET parameter ...` (exact names or `*`); nothing can be set.
fn config(args: &[Bytes]) -> Reply {
    if upper(&args[1]) != "GET" {
        return Reply::err("only CONFIG GET is supported by Causeway");
    }
    if args.len() < 3 {
        return arity_error("config|get");
    }
    let pairs = CONFIG_VALUES
        .iter()
        .filter(|(name, _)| {
            args[2..]
                .iter()
                .any(|p| p.as_ref() == b"*" || p.eq_ignore_ascii_case(name.as_bytes()))
        })
        .map(|(name, value)| (Reply::text(*name), Reply::text(*value)))
        .collect();
    Reply::Map(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gauge_is_printed_sorted_by_name() {
        let gauges = vec![
            ("store_versions".to_string(), 12.0),
            ("gss_lag_ms".to_string(), 2.5),
            ("sessions".to_string(), 3.0),
        ];
        let mut text = String::new();
        gauge_lines(gauges, &mut text);
        assert_eq!(
            text,
            "gss_lag_ms:2.5\r\nsessions:3\r\nstore_versions:12\r\n"
        );
    }
}
