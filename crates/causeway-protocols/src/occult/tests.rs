//! Occult through the kit's test network.
