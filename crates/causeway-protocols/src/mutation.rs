//! The `mutations!` table: a protocol's deliberately broken variants written once, as
//! `field = "name"` entries with their docs, from which the macro generates the struct of
//! flags the machines test, the list of names the registry and the scripts see, and the
//! parser that turns `Params::mutation` into flags. A name and its flag cannot drift apart,
//! and an unknown name is refused, never read as "no mutation".

/// The error for `name`, which `protocol` does not know; it lists what it does know.
pub fn unknown(protocol: &str, name: &str, known: &[&str]) -> String {
    let known = if known.is_empty() {
        "(none)".to_string()
    } else {
        known.join(", ")
    };
    format!("protocol '{protocol}' has no mutation '{name}'; known: {known}")
}

/// Declares a protocol's mutations from one table:
///
/// ```ignore
/// mutations! {
///     /// The struct's docs.
///     pub struct Mutation for "proto" {
///         /// What the variant breaks.
///         no_read_wait = "no-read-wait",
///     }
///     /// The list's docs.
///     pub const MUTATIONS;
/// }
/// ```
///
/// generates `struct Mutation` with one `pub bool` field per entry (all false: correct),
/// `const MUTATIONS: &[&str]` with the names in table order (order matters: scripts and
/// tests use the first), `Mutation::parse(name)` (refusing a name not in the table with
/// [`unknown`]'s error; `None` is all false), `Mutation::parse_among(name, known, protocol)`
/// (the same against a subset `known`) and `Mutation::active()` (the names set).
///
/// A module whose flavors accept different subsets names each list by its fields instead,
/// `pub const MUTATIONS = [no_read_wait, ...];` (several lists, each field in any of them),
/// and parses a flavor's name with `parse_among`; the compiler checks every listed field
/// exists.
#[macro_export]
macro_rules! mutations {
    // One list: every entry, in table order.
    (
        $(#[$smeta:meta])*
        $vis:vis struct $name:ident for $proto:literal {
            $( $(#[$fdoc:meta])* $field:ident = $mname:literal ),+ $(,)?
        }
        $(#[$ldoc:meta])*
        $lvis:vis const $list:ident;
    ) => {
        $crate::mutations! {
            $(#[$smeta])*
            $vis struct $name for $proto {
                $( $(#[$fdoc])* $field = $mname ),+
            }
            $(#[$ldoc])*
            $lvis const $list = [$($field),+];
        }
    };
    // Lists named by their fields.
    (
        $(#[$smeta:meta])*
        $vis:vis struct $name:ident for $proto:literal {
            $( $(#[$fdoc:meta])* $field:ident = $mname:literal ),+ $(,)?
        }
        $(
            $(#[$ldoc:meta])*
            $lvis:vis const $list:ident = [$($lfield:ident),* $(,)?];
        )+
    ) => {
        $(#[$smeta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        $vis struct $name {
            $( $(#[$fdoc])* pub $field: bool, )+
        }

        // Each field's name under the field's own name, so that the lists below are made
        // of fields the compiler has checked.
        #[allow(non_upper_case_globals)]
        impl $name {
            $( const $field: &'static str = $mname; )+
        }

        $( $(#[$ldoc])* $lvis const $list: &[&str] = &[$($name::$lfield),*]; )+

        impl $name {
            /// The variant named `name` (`None`: none, all false); a name not in the
            /// table is an error listing the ones that are.
            pub fn parse(name: Option<&str>) -> Result<$name, String> {
                $name::parse_among(name, &[$($name::$field),+], $proto)
            }

            /// Like [`Self::parse`], accepting only the names in `known` (the list of
            /// the flavor that runs, `protocol`).
            pub fn parse_among(
                name: Option<&str>,
                known: &[&str],
                protocol: &str,
            ) -> Result<$name, String> {
                let mut m = $name::default();
                let Some(name) = name.filter(|n| known.contains(n)) else {
                    return match name {
                        None => Ok(m),
                        Some(n) => Err($crate::mutation::unknown(protocol, n, known)),
                    };
                };
                $( m.$field |= name == $name::$field; )+
                if m == $name::default() {
                    // `known` names something the table lacks: the list is wrong.
                    return Err($crate::mutation::unknown($proto, name, &[$($name::$field),+]));
                }
                Ok(m)
            }

            /// The names of the variants set (one at most, as parsed).
            pub fn active(&self) -> Vec<&'static str> {
                let mut names = Vec::new();
                $( if self.$field { names.push($name::$field); } )+
                names
            }
        }
    };
}

/// Checks a parser against its list: `None` and every listed name parse to exactly what
/// they say, and an unknown name is refused with an error listing the known ones.
#[cfg(test)]
pub(crate) fn assert_parses(
    known: &[&str],
    parse: impl Fn(Option<&str>) -> Result<Vec<&'static str>, String>,
) {
    assert_eq!(parse(None), Ok(Vec::new()), "no mutation sets nothing");
    for name in known {
        assert_eq!(parse(Some(name)), Ok(vec![*name]), "one field for {name}");
    }
    let e = parse(Some("no-such-mutation")).expect_err("an unknown name is refused");
    assert!(e.contains("'no-such-mutation'"), "{e}");
    let listed = if known.is_empty() {
        "(none)".to_string()
    } else {
        known.join(", ")
    };
    assert!(e.ends_with(&format!("known: {listed}")), "{e}");
}

/// Checks that protocol `P`'s node and session, built on `topology` with a mutation it
/// does not know, refuse it rather than run the correct protocol.
#[cfg(test)]
pub(crate) fn assert_constructors_refuse<P: crate::Protocol>(topology: causeway_core::Topology) {
    use causeway_core::{DcId, NodeId, SessionId};
    let params = crate::params::Params {
        mutation: Some("no-such-mutation".to_string()),
        ..Default::default()
    };
    let config = crate::params::NodeConfig::new(NodeId(0), topology.clone(), params.clone());
    let section = P::Config::default();
    match P::recover(&config, &section, &[]) {
        Ok(_) => panic!("{}: a node ran an unknown mutation", P::NAME),
        Err(e) => assert!(e.contains("no mutation 'no-such-mutation'"), "{e}"),
    }
    match P::session(SessionId(1), DcId(0), &topology, &params, &section) {
        Ok(_) => panic!("{}: a session ran an unknown mutation", P::NAME),
        Err(e) => assert!(e.contains("no mutation 'no-such-mutation'"), "{e}"),
    }
}

#[cfg(test)]
mod tests {
    mutations! {
        /// A table of three.
        pub struct Demo for "demo" {
            /// First.
            first = "first",
            /// Second.
            second = "second",
            third = "third",
        }
        /// Every name.
        pub const DEMO;
    }

    mutations! {
        /// A table with two flavor lists.
        pub struct Split for "split" {
            a = "a",
            b = "b",
            c = "c",
        }
        /// One flavor's.
        const ONE = [c, a];
        /// Another's.
        const OTHER = [];
    }

    #[test]
    fn a_table_lists_parses_and_refuses() {
        assert_eq!(DEMO, &["first", "second", "third"]);
        super::assert_parses(DEMO, |n| Demo::parse(n).map(|m| m.active()));
        assert!(Demo::parse(Some("second")).unwrap().second);
    }

    #[test]
    fn flavor_lists_accept_their_own_names_only() {
        assert_eq!(ONE, &["c", "a"]);
        super::assert_parses(ONE, |n| {
            Split::parse_among(n, ONE, "one").map(|m| m.active())
        });
        super::assert_parses(OTHER, |n| {
            Split::parse_among(n, OTHER, "other").map(|m| m.active())
        });
        let e = Split::parse_among(Some("b"), ONE, "one").expect_err("not one's");
        assert_eq!(e, "protocol 'one' has no mutation 'b'; known: c, a");
        // `parse` takes the whole table, whatever the lists.
        super::assert_parses(&["a", "b", "c"], |n| Split::parse(n).map(|m| m.active()));
        let e = Split::parse_among(Some("z"), &["z"], "bad").expect_err("not in the table");
        assert!(e.contains("known: a, b, c"), "{e}");
    }
}
