//! Random moments for the kill tests: a cheap xorshift seeded from the clock, so the moments
//! differ from run to run.

/// A xorshift generator.
pub struct Moments(u64);

impl Moments {
    /// Seeded from the clock.
    pub fn from_clock() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::from(d.subsec_nanos()));
        Moments(nanos | 1)
    }

    /// A number below `below`.
    pub fn below(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}
