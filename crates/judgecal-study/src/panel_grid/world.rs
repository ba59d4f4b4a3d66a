//! The panel grid's simulated worlds: the systems each replication draws and the members'
//! scores and references of their items (see the module above for the list).

use judgecal_stats::rng::Rng;
use judgecal_stats::stats::standard_normal;

/// Systems a replication draws.
pub(super) const SYSTEMS: usize = 12;

/// A simulated world.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PanelWorld {
    Correlated,
    Noise,
    Biased,
    Missing(f64),
    /// The systems world, each member's score missing at random with this chance.
    SystemsMissing(f64),
    /// The systems world with the biased world's members (one over-rating each system by its
    /// own amount, sd 0.4), each member's score missing at random with this chance: a partial
    /// item lacking that member lacks its system bias too.
    BiasedMissing(f64),
    /// The systems world, a member's score missing where it would have been low: with chance
    /// 2p below the scale's centre (3), p/4 above it (a judge that fails on hard items).
    MissingLow(f64),
    /// The correlated world where systems differ as real ones do: in quality (sd 0.3), in how
    /// much every judge over-rates them (sd 0.15) and in how much each member does (sd 0.1).
    Systems,
    /// The systems world with weak members: slopes 0.2, 0.15 and 0.1 on the reference.
    Weak,
    /// The systems world on a skewed integer 1–5 scale: references mostly 4 and 5, members'
    /// scores integers.
    Integer,
    /// The systems world with 10 anchors per known system (80 a rubric).
    FewAnchors,
    /// The systems world with anchors from 2 known systems (160 each).
    TwoGroups,
}

impl PanelWorld {
    pub const ALL: [PanelWorld; 13] = [
        PanelWorld::Correlated,
        PanelWorld::Noise,
        PanelWorld::Biased,
        PanelWorld::Missing(0.1),
        PanelWorld::Missing(0.4),
        PanelWorld::SystemsMissing(0.4),
        PanelWorld::MissingLow(0.3),
        PanelWorld::BiasedMissing(0.4),
        PanelWorld::Systems,
        PanelWorld::Weak,
        PanelWorld::Integer,
        PanelWorld::FewAnchors,
        PanelWorld::TwoGroups,
    ];

    pub fn name(&self) -> String {
        match self {
            PanelWorld::Correlated => "correlated".into(),
            PanelWorld::Noise => "noise".into(),
            PanelWorld::Biased => "biased".into(),
            PanelWorld::Missing(p) => format!("missing {:.0}%", 100.0 * p),
            PanelWorld::SystemsMissing(p) => format!("systems missing {:.0}%", 100.0 * p),
            PanelWorld::MissingLow(p) => format!("systems missing low {:.0}%", 100.0 * p),
            PanelWorld::BiasedMissing(p) => format!("biased missing {:.0}%", 100.0 * p),
            PanelWorld::Systems => "systems".into(),
            PanelWorld::Weak => "weak".into(),
            PanelWorld::Integer => "integer".into(),
            PanelWorld::FewAnchors => "few anchors".into(),
            PanelWorld::TwoGroups => "two groups".into(),
        }
    }

    /// The chance that a member's score `j` of a served item is missing.
    pub(super) fn missing(&self, j: f64) -> f64 {
        match self {
            PanelWorld::Missing(p)
            | PanelWorld::SystemsMissing(p)
            | PanelWorld::BiasedMissing(p) => *p,
            PanelWorld::MissingLow(p) if j < 3.0 => (2.0 * p).min(0.95),
            PanelWorld::MissingLow(p) => p / 4.0,
            _ => 0.0,
        }
    }

    /// Whether systems differ in quality and in how the judges rate them.
    pub(super) fn systems_differ(&self) -> bool {
        matches!(
            self,
            PanelWorld::Systems
                | PanelWorld::SystemsMissing(_)
                | PanelWorld::MissingLow(_)
                | PanelWorld::BiasedMissing(_)
                | PanelWorld::Weak
                | PanelWorld::Integer
                | PanelWorld::FewAnchors
                | PanelWorld::TwoGroups
        )
    }

    /// Systems whose anchors are known, and anchors per system and rubric.
    pub(super) fn anchors(&self) -> (usize, usize) {
        match self {
            PanelWorld::FewAnchors => (8, 10),
            PanelWorld::TwoGroups => (2, 160),
            _ => (8, 40),
        }
    }
}

/// How one system differs from the others.
#[derive(Debug, Clone, Copy, Default)]
struct System {
    /// Its mean reference, less the population's.
    quality: f64,
    /// What every member adds to its outputs' scores (in reference units).
    shared: f64,
    /// What each member adds besides (in reference units).
    own: [f64; 3],
}

/// One draw of a world: its systems.
pub(super) struct Draw {
    world: PanelWorld,
    systems: Vec<System>,
}

impl Draw {
    pub(super) fn new(world: PanelWorld, rng: &mut Rng) -> Self {
        let own_sd = match world {
            PanelWorld::Biased => [0.4, 0.1, 0.0],
            PanelWorld::BiasedMissing(_) => [0.4, 0.1, 0.1],
            w if w.systems_differ() => [0.1; 3],
            _ => [0.0; 3],
        };
        let (quality, shared) = if world.systems_differ() {
            (0.3, 0.15)
        } else {
            (0.0, 0.0)
        };
        let systems = (0..SYSTEMS)
            .map(|_| System {
                quality: quality * standard_normal(rng),
                shared: shared * standard_normal(rng),
                own: own_sd.map(|s| s * standard_normal(rng)),
            })
            .collect();
        Self { world, systems }
    }

    /// An item of system `s`: the members' scores and the reference.
    pub(super) fn item(&self, s: usize, rng: &mut Rng) -> ([f64; 3], f64) {
        let sys = self.systems[s];
        let q = sys.quality + standard_normal(rng) * 0.7;
        let mut e = || standard_normal(rng);
        let b = sys.own.map(|o| o + sys.shared);
        let reference = |e: f64| (3.0 + q + 0.3 * e).clamp(1.0, 5.0);
        match self.world {
            PanelWorld::Correlated
            | PanelWorld::Missing(_)
            | PanelWorld::SystemsMissing(_)
            | PanelWorld::MissingLow(_)
            | PanelWorld::Systems
            | PanelWorld::FewAnchors
            | PanelWorld::TwoGroups => {
                let family = 0.4 * e();
                let js = [
                    3.0 + q + family + 0.4 * e() + b[0],
                    3.0 + q + family + 0.4 * e() + b[1],
                    3.0 + 0.8 * q + 0.5 * e() + b[2],
                ];
                (js, reference(e()))
            }
            PanelWorld::Noise => {
                let js = [
                    3.0 + q + 0.4 * e(),
                    3.0 + 0.8 * q + 0.5 * e(),
                    3.0 + 0.7 * e(),
                ];
                (js, reference(e()))
            }
            PanelWorld::Biased | PanelWorld::BiasedMissing(_) => {
                let js = [
                    3.0 + q + 0.4 * e() + b[0],
                    3.0 + 0.8 * q + 0.5 * e() + b[1],
                    3.0 + q + 0.6 * e() + b[2],
                ];
                (js, reference(e()))
            }
            PanelWorld::Weak => {
                let y = reference(e());
                let slopes = [0.2, 0.15, 0.1];
                let js = [0, 1, 2].map(|m| 3.0 + slopes[m] * (y - 3.0 + b[m]) + 0.4 * e());
                (js, y)
            }
            PanelWorld::Integer => {
                // A latent quality around 4.2, the references its rounding: 5 (about 37%),
                // 4 (41%), 3 (19%), 2 (3%), rarely 1.
                let t = 4.2 + 1.2 * q;
                let round = |x: f64| x.round().clamp(1.0, 5.0);
                let family = 0.4 * e();
                let js = [
                    round(t + family + 0.4 * e() + b[0] - 0.3),
                    round(t + family + 0.4 * e() + b[1]),
                    round(4.2 + q + 0.5 * e() + b[2]),
                ];
                (js, round(t + 0.3 * e()))
            }
        }
    }
}
