//! The wide-area round trips of the UniStore experiments (UniStore §8: Amazon EC2 in
//! Virginia, California, Frankfurt, Ireland and Brazil). The paper gives only the
//! Virginia-California round trip (61 ms, §8.1) and the range (26 to 202 ms, §8); the
//! other entries are typical public inter-region ping times between the matching AWS
//! regions (us-east-1, us-west-1, eu-central-1, eu-west-1, sa-east-1), rounded, chosen
//! inside that range: Frankfurt-Ireland is the shortest link (26 ms) and Frankfurt-Brazil
//! the longest (202 ms). The simulator takes one-way latencies: half of each round trip,
//! the same both ways.

/// An AWS region of the paper's deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    Virginia,
    California,
    Frankfurt,
    Ireland,
    Brazil,
}

/// Round trips in ms, in [`Region`] order (symmetric).
const RTT_MS: [[f64; 5]; 5] = [
    // Virginia, California, Frankfurt, Ireland, Brazil
    [0.0, 61.0, 90.0, 70.0, 117.0],
    [61.0, 0.0, 147.0, 138.0, 175.0],
    [90.0, 147.0, 0.0, 26.0, 202.0],
    [70.0, 138.0, 26.0, 0.0, 185.0],
    [117.0, 175.0, 202.0, 185.0, 0.0],
];

impl Region {
    pub fn name(self) -> &'static str {
        match self {
            Region::Virginia => "Virginia",
            Region::California => "California",
            Region::Frankfurt => "Frankfurt",
            Region::Ireland => "Ireland",
            Region::Brazil => "Brazil",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The round trip to `other` in ms.
    pub fn rtt_ms(self, other: Region) -> f64 {
        RTT_MS[self.index()][other.index()]
    }
}

/// The simulator's one-way latency matrix (`SimConfig::inter_dc_one_way_ms`) for DCs
/// `0..regions.len()` placed in `regions`, in order.
pub fn one_way_ms(regions: &[Region]) -> Vec<Vec<f64>> {
    regions
        .iter()
        .map(|a| regions.iter().map(|b| a.rtt_ms(*b) / 2.0).collect())
        .collect()
}

/// `Virginia, California, Frankfurt` for table headings.
pub fn names(regions: &[Region]) -> String {
    let names: Vec<&str> = regions.iter().map(|r| r.name()).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Region; 5] = [
        Region::Virginia,
        Region::California,
        Region::Frankfurt,
        Region::Ireland,
        Region::Brazil,
    ];

    #[test]
    fn round_trips_are_symmetric_and_within_the_papers_range() {
        for a in ALL {
            assert_eq!(a.rtt_ms(a), 0.0);
            for b in ALL.into_iter().filter(|b| *b != a) {
                assert_eq!(a.rtt_ms(b), b.rtt_ms(a), "{a:?}-{b:?}");
                assert!((26.0..=202.0).contains(&a.rtt_ms(b)), "§8: 26 to 202 ms");
            }
        }
        assert_eq!(Region::Virginia.rtt_ms(Region::California), 61.0, "§8.1");
    }

    #[test]
    fn the_matrix_is_one_way_in_the_given_order() {
        let m = one_way_ms(&[Region::California, Region::Brazil]);
        assert_eq!(m, vec![vec![0.0, 87.5], vec![87.5, 0.0]]);
        assert_eq!(names(&ALL[..3]), "Virginia, California, Frankfurt");
    }
}
