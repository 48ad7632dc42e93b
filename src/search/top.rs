//! The best k of a stream of candidates, found without keeping the stream: shared by the
//! rankers, whose candidates can be most of a catalog.

use std::cmp::Ordering;

/// The best `k` of `items` by `order` (`Less` ranks first), best first, and how many items
/// there were. Keeps up to 2k, cut back to the best k when full: one comparison per item and
/// no list the size of the candidates.
pub fn best_k<T: Copy>(items: impl Iterator<Item = T>, k: usize, order: impl Fn(&T, &T) -> Ordering) -> (Vec<T>, usize) {
    let mut best = Vec::new();
    let mut kth: Option<T> = None;
    let mut total = 0;
    for item in items {
        total += 1;
        if k == 0 || kth.as_ref().is_some_and(|kth| order(&item, kth) != Ordering::Less) {
            continue;
        }
        best.push(item);
        if best.len() == k.saturating_mul(2) {
            best.select_nth_unstable_by(k - 1, &order);
            best.truncate(k);
            kth = Some(best[k - 1]);
        }
    }
    if best.len() > k {
        best.select_nth_unstable_by(k - 1, &order);
        best.truncate(k);
    }
    best.sort_unstable_by(&order);
    (best, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `best_k` must equal: everything sorted, cut to k.
    fn sorted_prefix(items: &[(u32, u32)], k: usize) -> Vec<(u32, u32)> {
        let mut all = items.to_vec();
        all.sort_by(by_score);
        all.truncate(k);
        all
    }

    /// Higher score first, then lower id: a total order, as the rankers' are.
    fn by_score(a: &(u32, u32), b: &(u32, u32)) -> Ordering {
        b.1.cmp(&a.1).then(a.0.cmp(&b.0))
    }

    #[test]
    fn best_k_equals_the_sorted_prefix_and_counts_every_item() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for n in [0usize, 1, 5, 19, 20, 21, 100, 1_000] {
            let items: Vec<(u32, u32)> = (0..n as u32)
                .map(|id| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Few distinct scores: many ties, broken by id.
                    (id, (state % 17) as u32)
                })
                .collect();
            // Past 2k items the buffer is cut back (more than once at 1,000).
            for k in [0, 1, 3, 10, 64, n, usize::MAX] {
                let (best, total) = best_k(items.iter().copied(), k, by_score);
                assert_eq!(total, n);
                assert_eq!(best, sorted_prefix(&items, k), "{n} items, k = {k}");
            }
        }
    }
}
