//! `roce-route probe`: the rails' behaviour on the wire, pair by pair
//! (local rail x peer address). `verdict` and `peers` are pure; `frames`
//! builds and reads the packets; `io` owns the sockets and the loop;
//! `mtu` is what `check` says of the rails' MTUs. `rdma` (pure) and
//! `rdma_io` are `--rdma`: the pair at the RDMA layer, and the responder.

pub mod frames;
pub mod io;
pub mod mtu;
pub mod peers;
pub mod rdma;
pub mod rdma_io;
pub mod verdict;
