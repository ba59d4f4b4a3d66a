//! Domain types: validated names, scores and scales. Parse once at the edge; everything past
//! here can trust them. No web or storage types in this module.

pub mod anchors;
pub mod bounds;
pub mod calibration;
pub mod correction;
pub mod covariates;
pub mod ingest;
pub mod inputs;
pub mod pairwise;
pub mod panel;
pub mod rank_session;
pub mod raw;
pub mod repeats;
pub mod runlevel;
pub mod training;

use std::fmt;

use serde::{Deserialize, Serialize};

/// One problem with one row (or the request as a whole, where `row` is `None`) of an input.
/// Rows are counted from 1: the n-th element of a JSON `anchors` array, or the n-th data
/// record after a CSV header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub row: Option<usize>,
    pub field: String,
    pub problem: String,
}

impl Problem {
    pub fn at(row: Option<usize>, field: &str, problem: impl Into<String>) -> Self {
        Self {
            row,
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}

/// The longest judge, rubric or group name.
pub const NAME_MAX_LEN: usize = 64;
/// What a name may hold besides ASCII letters and digits (which it must start with).
const NAME_PUNCTUATION: [char; 4] = ['.', '_', '-', ':'];

/// The name rule as a regular expression, for the API schema: built from the same pieces
/// `check_name` checks, so the two cannot disagree.
pub fn name_pattern() -> String {
    let mut punctuation: String = NAME_PUNCTUATION.iter().filter(|&&c| c != '-').collect();
    // Last in the class, '-' is itself rather than a range.
    punctuation.push('-');
    format!("^[A-Za-z0-9][A-Za-z0-9{punctuation}]*$")
}

/// Characters allowed in judge and rubric names: they appear in URL paths and as Prometheus
/// label values, so they stay short and plain.
fn check_name(kind: &str, raw: &str) -> Result<String, String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || NAME_PUNCTUATION.contains(&c);
    if raw.is_empty() {
        return Err(format!("{kind} name is empty"));
    }
    if raw.len() > NAME_MAX_LEN {
        return Err(format!(
            "{kind} name is {} characters; at most {NAME_MAX_LEN}",
            raw.len()
        ));
    }
    if !raw.starts_with(|c: char| c.is_ascii_alphanumeric()) || !raw.chars().all(ok_char) {
        return Err(format!(
            "{kind} name {raw:?} must start with a letter or digit and use only letters, digits, '.', '_', '-' and ':'"
        ));
    }
    Ok(raw.to_owned())
}

macro_rules! name_type {
    ($(#[$meta:meta])* $name:ident, $kind:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(into = "String", try_from = "String")]
        pub struct $name(String);

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(raw: String) -> Result<Self, String> {
                Self::parse(&raw)
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }

        impl $name {
            pub fn parse(raw: &str) -> Result<Self, String> {
                check_name($kind, raw).map(Self)
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// The LLM judge whose scores are corrected, e.g. `gpt-4o-mini` or `ChatGPT`.
    JudgeName,
    "judge"
);
name_type!(
    /// The rubric (criterion) a score is given on, e.g. `coherence`.
    RubricName,
    "rubric"
);
name_type!(
    /// Who labelled an anchor's reference: the labeller or labelling session, the drift
    /// alarm's unit of independence (anchors of one rater may miss together).
    RaterName,
    "rater"
);
name_type!(
    /// A covariate: a numeric input beside the judge score, e.g. `length`.
    CovariateName,
    "covariate"
);
name_type!(
    /// The group of an anchor or a run: the system (model) whose output the judge scored,
    /// e.g. `gpt-4o` or `BART`.
    GroupName,
    "group"
);

/// An item's id inside one cell: any non-empty text up to 256 characters, no control
/// characters, stored in Unicode's composed form (NFC), so that one id typed with a composed or
/// a decomposed accent is one item. An id whose look differs from its text is refused rather
/// than stored as a second item: one with invisible characters (zero-width spaces, joiners,
/// direction marks, a byte-order mark, a soft hyphen), compatibility forms (full-width letters,
/// a non-breaking space: what NFKC would change), a dash or minus that looks like `-`, or a
/// leading or trailing space.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ItemId(String);

impl ItemId {
    pub const MAX_LEN: usize = 256;

    /// An id to store an item under (an anchor's, a comparison's).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let named = Self::named(raw)?;
        if raw.starts_with(char::is_whitespace) || raw.ends_with(char::is_whitespace) {
            return Err("item_id starts or ends with a space; send it without".into());
        }
        if raw.is_ascii() {
            return Ok(named);
        }
        use unicode_normalization::UnicodeNormalization;
        if let Some(c) = raw.chars().find(|&c| invisible(c)) {
            return Err(format!(
                "item_id contains the invisible character U+{:04X}; send the id without it",
                u32::from(c)
            ));
        }
        if let Some(c) = raw.chars().find(|&c| dash_like(c)) {
            return Err(format!(
                "item_id contains U+{:04X}, which looks like '-': send '-' (U+002D)",
                u32::from(c)
            ));
        }
        let plain: String = raw.nfkc().collect();
        if plain != named.0 {
            return Err(format!(
                "item_id contains compatibility characters (full-width letters, a non-breaking \
                 space, a ligature) that look like others: send its plain form {plain:?}"
            ));
        }
        Ok(named)
    }

    /// An id a request names to pair or echo items (a run's items, a correction's, a check's
    /// re-scored anchor items), not to store one: the same length and character rules and the
    /// same composed form as [`ItemId::parse`], so it pairs with what was stored, without the
    /// look-alike refusals that keep a second item from being stored.
    pub fn named(raw: &str) -> Result<Self, String> {
        if raw.is_empty() {
            return Err("item_id is empty".into());
        }
        if raw.chars().count() > Self::MAX_LEN {
            return Err(format!(
                "item_id is longer than {} characters",
                Self::MAX_LEN
            ));
        }
        if raw.chars().any(char::is_control) {
            return Err("item_id contains a control character".into());
        }
        if raw.is_ascii() {
            return Ok(Self(raw.to_owned()));
        }
        use unicode_normalization::UnicodeNormalization;
        Ok(Self(raw.nfc().collect()))
    }

    /// An id as the store holds it, read back as it is: ids stored before the look-alike rule
    /// (a leading space, say) stay readable, listable and deletable.
    pub fn from_stored(raw: String) -> Result<Self, String> {
        if raw.is_empty() {
            return Err("item_id is empty".into());
        }
        Ok(Self(raw))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A character that prints as nothing: format characters and fillers.
fn invisible(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F
            | 0x1160
            | 0x17B4
            | 0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
    )
}

/// A dash or minus sign other than the ASCII hyphen-minus (full-width ones are compatibility
/// forms, refused as such).
fn dash_like(c: char) -> bool {
    matches!(
        u32::from(c),
        0x2010..=0x2015 | 0x2212 | 0xFE58 | 0xFE63 | 0x2E3A | 0x2E3B
    )
}

/// The version of a judge that gave a score: an opaque label the platform controls (a model
/// snapshot, a hash of the prompt template, decoding settings), up to 128 characters with no
/// control characters and no surrounding spaces. Scores without one belong to the cell's
/// unversioned anchors (`Option::None` everywhere; `''` in the store).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct JudgeVersion(String);

impl JudgeVersion {
    pub const MAX_LEN: usize = 128;

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() {
            return Err("judge_version is empty; leave it out for scores without a version".into());
        }
        if raw.chars().count() > Self::MAX_LEN {
            return Err(format!(
                "judge_version is longer than {} characters",
                Self::MAX_LEN
            ));
        }
        if raw.chars().any(char::is_control) {
            return Err("judge_version contains a control character".into());
        }
        if raw.trim() != raw {
            return Err("judge_version starts or ends with a space".into());
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The stored form of an optional version: `''` for none.
    pub fn stored(version: Option<&Self>) -> &str {
        version.map_or("", Self::as_str)
    }

    /// The optional version a stored `''`-or-label reads as.
    pub fn from_stored(raw: &str) -> Result<Option<Self>, String> {
        if raw.is_empty() {
            Ok(None)
        } else {
            Self::parse(raw).map(Some)
        }
    }

    /// How a message names an optional version.
    pub fn describe(version: Option<&Self>) -> String {
        version.map_or_else(|| "(none)".to_owned(), |v| format!("{:?}", v.0))
    }
}

impl TryFrom<String> for JudgeVersion {
    type Error = String;
    fn try_from(raw: String) -> Result<Self, String> {
        Self::parse(&raw)
    }
}

impl From<JudgeVersion> for String {
    fn from(v: JudgeVersion) -> String {
        v.0
    }
}

impl fmt::Display for JudgeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A (judge, rubric) pair: the unit a calibrator is fitted for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellKey {
    pub judge: JudgeName,
    pub rubric: RubricName,
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.judge, self.rubric)
    }
}

/// The largest magnitude of any score the service reads: judge scores, references, repeats,
/// panel members' scores and rubric scales' bounds. Sums of squares over a million anchors
/// stay finite (a judge score of 1e308 made a version's held-out figures overflow to NaN, and
/// a scale of ±1e308 a picture's axis infinite).
pub const MAX_MAGNITUDE: f64 = 1e9;

/// `x` if it is a finite number within ±[`MAX_MAGNITUDE`], else what is wrong with it.
pub fn bounded(x: f64) -> Result<f64, String> {
    if x.is_finite() && x.abs() <= MAX_MAGNITUDE {
        Ok(x)
    } else {
        Err(format!(
            "must be a finite number within ±1e9, got {}",
            shown(x)
        ))
    }
}

/// A number as a message shows it: plain where short, in exponent form where huge or tiny (1e308
/// printed plainly is 309 digits).
pub fn shown(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e6).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// The closed range reference scores of a rubric live in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scale {
    pub min: f64,
    pub max: f64,
}

impl Scale {
    /// What a rubric gets when it is first seen without a `PUT /v1/rubrics/{rubric}`.
    pub const DEFAULT: Scale = Scale { min: 1.0, max: 5.0 };

    /// A scale: both bounds within ±1e9, `max` above `min` by at least a millionth of their
    /// magnitude (a narrower one cannot be drawn or binned).
    pub fn new(min: f64, max: f64) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        if let Err(e) = bounded(min) {
            problems.push(Problem::at(None, "min", e));
        }
        if let Err(e) = bounded(max) {
            problems.push(Problem::at(None, "max", e));
        }
        if problems.is_empty() && min >= max {
            problems.push(Problem::at(
                None,
                "max",
                format!("must be greater than min ({min}); got {max}"),
            ));
        } else if problems.is_empty() && max - min < 1e-6 * min.abs().max(max.abs()).max(1.0) {
            problems.push(Problem::at(
                None,
                "max",
                format!(
                    "must exceed min ({min}) by at least a millionth of the scale's magnitude; got {max}"
                ),
            ));
        }
        if problems.is_empty() {
            Ok(Self { min, max })
        } else {
            Err(problems)
        }
    }

    /// A scale as the store holds it, read back as it was set: one stored before the bounds
    /// of [`Scale::new`] stays readable (a start-up must never fail on it), and the pictures
    /// draw it within drawable ranges.
    pub fn from_stored(min: f64, max: f64) -> Option<Self> {
        (min.is_finite() && max.is_finite() && min < max).then_some(Self { min, max })
    }

    pub fn contains(&self, x: f64) -> bool {
        (self.min..=self.max).contains(&x)
    }
}

/// A rubric and its scale.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rubric {
    pub name: RubricName,
    pub scale: Scale,
    pub description: String,
    pub updated_at_ms: i64,
}

/// One stored anchor: an item scored by both the judge and the trusted reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Anchor {
    pub item_id: ItemId,
    pub judge_score: f64,
    pub reference_score: f64,
    /// The system whose output was judged, where the uploader named it.
    pub group: Option<GroupName>,
    /// Who labelled the reference, where the uploader named them.
    pub rater: Option<RaterName>,
    /// The judge version that gave `judge_score`; `None` for an unversioned anchor.
    pub judge_version: Option<JudgeVersion>,
    /// When the upload that set its reference ran (the store's time, shared by the anchors one
    /// upload labels; an item another judge version re-scores keeps its reference's): the
    /// unit of independence of an anchor that names no rater. Read only for a training
    /// snapshot (`Store::judge_anchors`); `None` elsewhere.
    pub reference_at_ms: Option<i64>,
    /// Numeric inputs beside the judge score (a response's length), where the uploader gave
    /// them; an item's re-scored rows share its row's unless they give their own.
    pub covariates: covariates::Covariates,
    /// Further scores of the item by the same judge version (the judge re-asked); empty where
    /// the row carries none. `judge_score` is the one the corrector is fitted on.
    pub repeats: Vec<f64>,
}

impl Anchor {
    /// Its unit of independence, as the drift alarm counts units: its rater, else its upload.
    pub fn unit(&self) -> Option<String> {
        match (&self.rater, self.reference_at_ms) {
            (Some(r), _) => Some(format!("rater {}", r.as_str())),
            (None, Some(ms)) => Some(format!("upload {ms}")),
            (None, None) => None,
        }
    }
}

/// What `GET /v1/cells` lists.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSummary {
    pub key: CellKey,
    pub anchor_count: i64,
    pub updated_at_ms: i64,
    /// Its pairwise comparisons (a cell holds these or anchors, not both).
    pub comparison_count: i64,
}

/// Milliseconds since the Unix epoch, the time unit of the store.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// Unix milliseconds as RFC 3339 (UTC).
pub fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_ids_are_composed_and_look_alikes_refused() {
        // One id typed composed and decomposed is one item.
        let composed = ItemId::parse("caf\u{e9}-1").unwrap();
        assert_eq!(ItemId::parse("cafe\u{301}-1").unwrap(), composed);
        assert_eq!(composed.as_str(), "caf\u{e9}-1");
        assert_eq!(ItemId::parse("story 17").unwrap().as_str(), "story 17");
        assert_eq!(ItemId::parse("物語-1").unwrap().as_str(), "物語-1");
        // Each look-alike of "story-1" is refused, naming what is off.
        for (id, says) in [
            ("story\u{2010}1", "U+2010"),
            ("story\u{2212}1", "U+2212"),
            ("ｓｔｏｒｙ-1", "plain form \"story-1\""),
            ("story-1\u{200B}", "U+200B"),
            ("story\u{a0}1", "plain form \"story 1\""),
            (" story-1", "starts or ends"),
            ("story-1\u{a0}", "starts or ends"),
            ("\u{feff}story-1", "U+FEFF"),
        ] {
            let e = ItemId::parse(id).unwrap_err();
            assert!(e.contains(says), "{id:?}: {e}");
        }
    }

    #[test]
    fn names_accept_plain_identifiers_and_reject_the_rest() {
        assert!(JudgeName::parse("Mistral-7B").is_ok());
        assert!(RubricName::parse("coherence").is_ok());
        assert!(JudgeName::parse("").is_err());
        assert!(JudgeName::parse("-lead").is_err());
        assert!(JudgeName::parse("has space").is_err());
        assert!(JudgeName::parse("a/b").is_err());
        assert!(JudgeName::parse(&"x".repeat(65)).is_err());
    }

    #[test]
    fn scale_rejects_empty_and_non_finite_ranges() {
        assert!(Scale::new(1.0, 5.0).is_ok());
        assert_eq!(Scale::new(5.0, 5.0).unwrap_err()[0].field, "max");
        assert_eq!(Scale::new(f64::NAN, 5.0).unwrap_err()[0].field, "min");
        assert!(Scale::DEFAULT.contains(1.0) && Scale::DEFAULT.contains(5.0));
        assert!(!Scale::DEFAULT.contains(5.000001));
    }

    #[test]
    fn item_ids_reject_empty_long_and_control_text() {
        assert!(ItemId::parse("story-17").is_ok());
        assert!(ItemId::parse("").is_err());
        assert!(ItemId::parse("a\nb").is_err());
        assert!(ItemId::parse(&"é".repeat(257)).is_err());
        assert!(ItemId::parse(&"é".repeat(256)).is_ok());
    }

    #[test]
    fn judge_versions_are_opaque_but_plain_text() {
        let v = JudgeVersion::parse("gpt-4o-2024-08-06+prompt:9f2c1a t=0").unwrap();
        assert_eq!(JudgeVersion::stored(Some(&v)), v.as_str());
        assert_eq!(JudgeVersion::from_stored(v.as_str()).unwrap(), Some(v));
        assert_eq!(JudgeVersion::from_stored("").unwrap(), None);
        assert!(JudgeVersion::parse("").is_err());
        assert!(JudgeVersion::parse(" v2").is_err());
        assert!(JudgeVersion::parse("a\tb").is_err());
        assert!(JudgeVersion::parse(&"v".repeat(129)).is_err());
    }
}
