//! The whole server pipeline on a sequence of messages: the runtime's inbound checks, one
//! engine with a registrar, digest authentication and DNS, on a simulated clock. The pipeline
//! and its invariants live in the simulator crate (`herald_sim::pipeline`, where the input
//! format is described), so that a crash input replays there, bit for bit, as a plain test:
//! herald's seed is fixed and time is simulated (crates/sim/tests/replay.rs).
//!
//! Replaying a crash: copy the input into fuzz/regressions/engine_pipeline/ and run
//! `cargo test -p herald-sim --test replay`; `HERALD_FUZZ_TRACE=1` prints every message in and
//! out.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    herald_sim::pipeline::run(data);
});
