//! Python's `random.Random(seed)` (MT19937 seeded by `init_by_array`, as CPython seeds it) and
//! `Random.sample`: Salt's `random_sample` and `random_shuffle` filters with a seed give the
//! same order as Salt's (the seed of a minion's id spreads cron minutes the same way).
//! Without a seed the order comes from the OS.

const N: usize = 624;
const M: usize = 397;

pub(crate) struct Mt {
    state: [u32; N],
    index: usize,
}

impl Mt {
    fn init_genrand(seed: u32) -> Mt {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt { state, index: N }
    }

    /// CPython's `init_by_array`.
    fn init_by_array(key: &[u32]) -> Mt {
        let mut mt = Mt::init_genrand(19_650_218);
        let s = &mut mt.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = s[i - 1];
            s[i] = (s[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = s[i - 1];
            s[i] =
                (s[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
        }
        s[0] = 0x8000_0000;
        mt
    }

    /// `random.Random(n)` for an integer `n` (Python uses its absolute value).
    #[cfg(test)]
    pub(crate) fn from_int(n: i128) -> Mt {
        Mt::from_magnitude_be(&n.unsigned_abs().to_be_bytes())
    }

    /// `random.Random(text)`: Python turns a string seed into the integer of its UTF-8 bytes
    /// followed by their SHA-512 digest (big-endian).
    pub(crate) fn from_text(text: &str) -> Mt {
        use sha2::Digest as _;
        let mut bytes = text.as_bytes().to_vec();
        bytes.extend_from_slice(&sha2::Sha512::digest(text.as_bytes()));
        Mt::from_magnitude_be(&bytes)
    }

    /// Seeded by a non-negative integer given as big-endian bytes: its 32-bit words from the
    /// least significant, high zero words left out (one zero word for zero).
    fn from_magnitude_be(bytes: &[u8]) -> Mt {
        let mut key: Vec<u32> = bytes
            .rchunks(4)
            .map(|c| c.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)))
            .collect();
        while key.len() > 1 && key.last() == Some(&0) {
            key.pop();
        }
        if key.is_empty() {
            key.push(0);
        }
        Mt::init_by_array(&key)
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            for k in 0..N {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % N] & 0x7fff_ffff);
                let mut v = self.state[(k + M) % N] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.state[k] = v;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)`, for k up to 64.
    fn getrandbits(&mut self, k: u32) -> u64 {
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - k));
        low | (high << 32)
    }

    /// `_randbelow(n)` for n >= 1.
    fn randbelow(&mut self, n: usize) -> usize {
        let k = usize::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k) as usize;
            if r < n {
                return r;
            }
        }
    }
}

/// Where `sample` draws from: Python's generator for a seed, or the OS.
pub(crate) enum Source {
    Seeded(Box<Mt>),
    Os,
}

impl Source {
    fn below(&mut self, n: usize) -> usize {
        match self {
            Source::Seeded(mt) => mt.randbelow(n),
            Source::Os => rand::Rng::gen_range(&mut rand::thread_rng(), 0..n),
        }
    }
}

/// `Random.sample(population, k)` as Python 3.11 draws it; Python's error when `k` is larger
/// than the population.
pub(crate) fn sample<T: Clone>(
    population: &[T],
    k: usize,
    source: &mut Source,
) -> Result<Vec<T>, String> {
    let n = population.len();
    if k > n {
        return Err("Sample larger than population or is negative".into());
    }
    let mut setsize = 21usize;
    if k > 5 {
        // 4 ** ceil(log(k * 3, 4))
        let mut power = 1usize;
        while power < k * 3 {
            power *= 4;
        }
        setsize += power;
    }
    let mut result = Vec::with_capacity(k);
    if n <= setsize {
        let mut pool = population.to_vec();
        for i in 0..k {
            let j = source.below(n - i);
            result.push(pool[j].clone());
            pool[j] = pool[n - i - 1].clone();
        }
    } else {
        let mut selected = std::collections::HashSet::new();
        for _ in 0..k {
            let mut j = source.below(n);
            while selected.contains(&j) {
                j = source.below(n);
            }
            selected.insert(j);
            result.push(population[j].clone());
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_random_sequences() {
        // random.Random(5).getrandbits(32) and .sample(range(10), 10), from Python 3.11.
        let mut mt = Mt::from_int(5);
        assert_eq!(mt.next_u32(), 2_675_342_405);
        let items: Vec<u32> = (0..10).collect();
        let mut source = Source::Seeded(Box::new(Mt::from_int(5)));
        assert_eq!(
            sample(&items, 10, &mut source).unwrap(),
            vec![9, 4, 5, 6, 7, 8, 0, 1, 3, 2]
        );
        let mut source = Source::Seeded(Box::new(Mt::from_int(1 << 40)));
        assert_eq!(sample(&items, 3, &mut source).unwrap(), vec![1, 5, 9]);
        // Larger populations draw indexes into a set.
        let many: Vec<u32> = (0..100).collect();
        let mut source = Source::Seeded(Box::new(Mt::from_int(-7)));
        assert_eq!(sample(&many, 3, &mut source).unwrap(), vec![41, 19, 50]);
        let many: Vec<u32> = (0..1000).collect();
        let mut source = Source::Seeded(Box::new(Mt::from_int((1i128 << 70) + 3)));
        assert_eq!(
            sample(&many, 4, &mut source).unwrap(),
            vec![167, 339, 759, 250]
        );
        assert!(sample(&items, 11, &mut Source::Os).is_err());
        // random.Random("web01").sample(range(10), 4)
        let mut source = Source::Seeded(Box::new(Mt::from_text("web01")));
        assert_eq!(sample(&items, 4, &mut source).unwrap(), vec![5, 6, 0, 1]);
    }
}
