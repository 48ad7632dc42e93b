//! Work split across a few threads: a compile's schema preparation and keyword index.

/// Most threads one piece of work is split across.
const MAX_THREADS: usize = 4;

/// Threads for `items` units of work: one below `parallel_from`, else one per core (at most
/// [`MAX_THREADS`]).
pub fn threads_for(items: usize, parallel_from: usize) -> usize {
    match items {
        n if n < parallel_from => 1,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS),
    }
}

/// `f(i, item)` for every item, in order; on [`threads_for`] threads, in consecutive chunks.
pub fn on_threads<T: Sync, R: Send>(items: &[T], parallel_from: usize, f: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    let threads = threads_for(items.len(), parallel_from);
    if threads <= 1 {
        return items.iter().enumerate().map(|(i, item)| f(i, item)).collect();
    }
    let size = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let f = &f;
        let chunks: Vec<_> = items
            .chunks(size)
            .enumerate()
            .map(|(c, chunk)| scope.spawn(move || chunk.iter().enumerate().map(|(i, item)| f(c * size + i, item)).collect::<Vec<_>>()))
            .collect();
        chunks.into_iter().flat_map(|chunk| chunk.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_item_order_with_their_index_on_any_number_of_threads() {
        for n in [0, 1, 2, 3, 7, 100] {
            let items: Vec<usize> = (0..n).map(|i| i * 10).collect();
            let out = on_threads(&items, 2, |i, &item| (i, item + 1));
            assert_eq!(out, (0..n).map(|i| (i, i * 10 + 1)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_panic_on_a_worker_reaches_the_caller() {
        let items: Vec<u32> = (0..64).collect();
        let caught = std::panic::catch_unwind(|| on_threads(&items, 1, |_, &item| if item == 63 { panic!("worker") } else { item }));
        assert!(caught.is_err());
    }
}
