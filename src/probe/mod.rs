//! `roce-route probe`: the rails' behaviour on the wire, pair by pair
//! (local rail x peer address). `verdict` and `peers` are pure; `frames`
//! builds and reads the packets; `io` owns the sockets and the loop.

pub mod frames;
pub mod io;
pub mod peers;
pub mod verdict;
