//! Causeway checker (layer 3): the history model recorded by simulated and real clients,
//! its JSON-lines form, and the consistency checkers that judge a history.

pub mod history;

pub use history::{FinalRead, HOp, History, Outcome, TxnRecord};
