//! [`Secret`]: a password or cluster secret that never shows in `Debug` output.
//!
//! Configs, handshake frames and client options derive `Debug`, and `Debug` output ends up
//! in logs, panics and error messages. Holding secrets in this type keeps them out of all
//! of those: its `Debug` prints a fixed placeholder, never the length or any character.
//! Serde sees the plain string, so config files and wire encodings are unchanged.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Deref;

/// What `Debug` prints instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// A secret string (a password, a cluster secret), redacted in `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, for the few places that must use it (proofs, comparisons).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Deref for Secret {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Secret {
        Secret(text)
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Secret {
        Secret(text.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug only
    struct Holder {
        user: String,
        password: Option<Secret>,
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let h = Holder {
            user: "ops".into(),
            password: Some("hunter2-hunter2-hunter2".into()),
        };
        let shown = format!("{h:?} {h:#?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains(REDACTED) && shown.contains("ops"), "{shown}");
        assert_eq!(h.password.as_deref(), Some("hunter2-hunter2-hunter2"));
    }

    #[test]
    fn serde_sees_the_plain_string() {
        let s = Secret::new("pw");
        let bytes = postcard::to_allocvec(&s).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&"pw".to_string()).unwrap());
        let back: Secret = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.expose(), "pw");
    }
}
