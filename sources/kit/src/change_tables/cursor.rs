//! Where a poll is inside a transaction: Debezium's skip rules at a restart (changes before the
//! stored change LSN, and at it the first `event_serial_no` rows, were delivered) and the
//! `event_serial_no` of each event (`setChangePosition`: events at one (commit, change) LSN pair
//! count up).

/// The stream's state between events; `L` is the server's LSN.
#[derive(Debug, Clone)]
pub struct Cursor<L> {
    /// The last event's (commit, change) LSNs and its `event_serial_no`.
    last: Option<(L, L)>,
    serial: i64,
    resuming: Option<Resuming<L>>,
}

/// Where a restart resumes inside a transaction: the stored (commit, change) LSNs and how many
/// rows at them were delivered.
#[derive(Debug, Clone)]
struct Resuming<L> {
    at: (L, L),
    serial: i64,
    seen: i64,
}

impl<L: Ord + Copy> Cursor<L> {
    /// A stream starting at a stored position: `change` is the stored (commit, change) pair
    /// and `serial` its `event_serial_no`, when the position is inside a transaction.
    pub fn new(change: Option<(L, L)>, serial: Option<i64>) -> Self {
        let serial = serial.unwrap_or(0);
        Cursor {
            last: change,
            serial,
            resuming: change.map(|at| Resuming {
                at,
                serial,
                seen: 0,
            }),
        }
    }

    /// Whether a restart already delivered the change row at `at` (commit, change LSN).
    pub fn skips(&mut self, at: (L, L)) -> bool {
        let Some(r) = self.resuming.as_mut() else {
            return false;
        };
        match at.cmp(&r.at) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => {
                r.seen += 1;
                r.seen <= r.serial
            }
            std::cmp::Ordering::Greater => {
                self.resuming = None;
                false
            }
        }
    }

    /// The `event_serial_no` of an event at `at` that took `count` rows: the last one's plus
    /// `count` when it is at the same LSNs, else `count`.
    pub fn next_serial(&mut self, at: (L, L), count: i64) -> i64 {
        self.serial = if self.last == Some(at) {
            self.serial + count
        } else {
            count
        };
        self.last = Some(at);
        self.serial
    }

    /// A poll ended: the next event starts a new count.
    pub fn poll_ended(&mut self) {
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_skips_what_was_delivered_and_numbers_the_rest() {
        // Stored after the delete of a key update (delete, create at one change LSN): the
        // delete's row is skipped, the create comes with event number 2.
        let mut c = Cursor::new(Some((9, 5)), Some(1));
        assert!(c.skips((9, 4)));
        assert!(c.skips((9, 5)));
        assert!(!c.skips((9, 5)));
        assert_eq!(c.next_serial((9, 5), 1), 2);
        assert!(!c.skips((9, 6)));
        assert_eq!(c.next_serial((9, 6), 1), 1);
        // Stored after an update (two rows, event number 2): both rows skipped.
        let mut c = Cursor::new(Some((9, 5)), Some(2));
        assert!(c.skips((9, 5)));
        assert!(c.skips((9, 5)));
        assert!(!c.skips((10, 1)));
        assert_eq!(c.next_serial((10, 1), 2), 2);
        // Nothing stored inside a transaction: nothing skipped.
        let mut c = Cursor::new(None, None);
        assert!(!c.skips((1, 1)));
        assert_eq!(c.next_serial((1, 1), 1), 1);
        c.poll_ended();
        assert_eq!(c.next_serial((1, 1), 1), 1);
    }
}
