//! The fault-injecting store of the tests lives in the crate (`skerry_core::io::faults`, also
//! behind the soak's `SKERRY_FAULTS`); this adds the sweep the per-verb fault tests share.

#[allow(unused_imports)]
pub use skerry_core::io::faults::{Call, FaultStore, Faulty};

/// Runs `f` with a fault at its first store call, then again with the fault one call later,
/// and so on until an attempt completes without reaching the armed call: a fault at every
/// call of the verb's path (as its retries take it). Each attempt must succeed (the fault
/// absorbed: a retried read, a best-effort delete) or fail typed and retryable. Returns the
/// last result and the failures it reported and the faults injected.
pub async fn sweep<T, F, Fut>(what: &str, faults: &FaultStore, mut f: F) -> (T, (u32, u64))
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, skerry_core::error::Error>>,
{
    let mut failed = 0;
    let start = faults.total();
    for n in 1.. {
        faults.fail_nth(n);
        let before = faults.total();
        match f().await {
            // The armed call was never reached: every call has met its fault.
            Ok(v) if faults.total() == before => {
                faults.fail_nth(0);
                return (v, (failed, faults.total() - start));
            }
            // A fault absorbed: go on to the next call.
            Ok(_) => {}
            Err(e) => {
                assert!(
                    e.retryable(),
                    "{what}: a fault at call {n} surfaced as a non-retryable {}: {e}",
                    e.code()
                );
                failed += 1;
            }
        }
        assert!(n < 2_000, "{what} never converged");
    }
    unreachable!()
}
