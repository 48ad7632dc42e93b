use clap::Parser;
use std::ffi::{c_int, c_long};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's own option API (the static library the crate links).
unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

/// `mi_option_purge_delay` (the same index in mimalloc v2 and v3).
const MI_OPTION_PURGE_DELAY: c_int = 15;

fn main() -> anyhow::Result<()> {
    // mimalloc v3 hands freed pages back to the OS a second after the free; an evicted
    // 100k-tool catalog then stays resident while the next one compiles. After 10 ms (v2's
    // default) the peak stays within --catalog-cache-bytes + 256 MiB (benches/catalog_memory.rs).
    // MIMALLOC_PURGE_DELAY in the environment still decides when set.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets a plain integer option; no allocation has to be in any state for it.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 10) };
    }
    toolrouter::cli::run(toolrouter::config::Cli::parse())
}
