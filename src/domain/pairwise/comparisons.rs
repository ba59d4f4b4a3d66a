//! Comparison batches (`POST /v1/comparisons`): a pairwise judge's verdicts on two systems'
//! answers to one prompt, with the people's preference where it was labelled. Read from a
//! JSON envelope or CSV, every row checked and every problem named by row and field before
//! anything is stored, as anchor batches are; then planned against the stored rows (new,
//! unchanged, replaced, conflicting) without the database.
//!
//! An outcome (`verdict`, `verdict_swapped`, `preference`) is `"a"`, `"b"`, `"tie"`, or a
//! number in [0, 1]: the probability that a's answer is the better. It is stored as that
//! number (a 1, b 0, a tie ½: ties count one half for each side). `verdict_swapped` is the
//! judge's verdict with b shown first, already mapped back, so `"a"` still means a. An item
//! compares one pair of systems and has one preference, whichever judge version judged it.

use std::collections::HashMap;

use serde_json::Value;

use crate::domain::covariates::{self, Covariates};
use crate::domain::raw::{RawField, batch_size, name, ok, optional_name, read_csv, unknown_fields};
use crate::domain::{
    CellKey, GroupName, ItemId, JudgeName, JudgeVersion, Problem, RaterName, RubricName,
};

/// The columns a CSV upload must have, in any order.
pub const CSV_COLUMNS: [&str; 6] = ["judge", "rubric", "item_id", "a", "b", "verdict"];
/// Its optional columns; covariates are `covariate.<name>` columns.
pub const OPTIONAL_COLUMNS: [&str; 4] = ["verdict_swapped", "preference", "rater", "judge_version"];
/// The fields a JSON row may have.
const ROW_FIELDS: [&str; 8] = [
    "item_id",
    "a",
    "b",
    "verdict",
    "verdict_swapped",
    "preference",
    "rater",
    covariates::FIELD,
];
const ENVELOPE_FIELDS: [&str; 4] = ["judge", "rubric", "judge_version", "comparisons"];

/// One row as uploaded, with its 1-based position in the batch.
#[derive(Debug, Clone)]
pub struct RawComparison {
    pub row: usize,
    pub judge: RawField,
    pub rubric: RawField,
    pub judge_version: RawField,
    pub item_id: RawField,
    pub a: RawField,
    pub b: RawField,
    pub verdict: RawField,
    pub verdict_swapped: RawField,
    pub preference: RawField,
    pub rater: RawField,
    pub covariates: Covariates,
    /// Problems found while reading the row, reported with the batch's others.
    pub problems: Vec<Problem>,
}

/// One checked comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub item_id: ItemId,
    pub a: GroupName,
    pub b: GroupName,
    /// The probability, by the judge, that a's answer is the better.
    pub verdict: f64,
    pub verdict_swapped: Option<f64>,
    /// The people's; `None` on an unlabelled verdict.
    pub preference: Option<f64>,
    pub rater: Option<RaterName>,
    pub covariates: Covariates,
}

/// One cell's checked rows of one judge version.
#[derive(Debug, Clone)]
pub struct ComparisonBatch {
    pub key: CellKey,
    pub judge_version: Option<JudgeVersion>,
    pub comparisons: Vec<Comparison>,
    /// The batch row of each comparison, to name rows in later errors.
    pub rows: Vec<usize>,
}

/// Digits, one point, digits (`0.75`, `1.0`, `.5`): no sign, exponent or other spelling.
fn is_plain_decimal(s: &str) -> bool {
    let Some((whole, fraction)) = s.split_once('.') else {
        return false;
    };
    !fraction.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b.is_ascii_digit())
}

/// A JSON value with nulls read as absent.
fn optional(v: RawField) -> RawField {
    match v {
        RawField::Other("null") => RawField::Missing,
        other => other,
    }
}

/// Reads the JSON envelope `{"judge", "rubric", "judge_version"?, "comparisons": [...]}`.
pub fn rows_from_json(body: &Value) -> Result<Vec<RawComparison>, Vec<Problem>> {
    let Some(obj) = body.as_object() else {
        return Err(vec![Problem::at(
            None,
            "body",
            "must be a JSON object with judge, rubric and comparisons",
        )]);
    };
    let mut problems: Vec<Problem> =
        unknown_fields(None, obj, &ENVELOPE_FIELDS, "the comparison batch").collect();
    let items = match obj.get("comparisons") {
        Some(Value::Array(items)) => items.as_slice(),
        Some(_) => {
            problems.push(Problem::at(None, "comparisons", "must be an array"));
            &[]
        }
        None => {
            problems.push(Problem::at(None, "comparisons", "is missing"));
            &[]
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let envelope = |name: &str| optional(RawField::from_json(obj.get(name)));
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let row = i + 1;
            let field = |name: &str| match item {
                Value::Object(o) => optional(RawField::from_json(o.get(name))),
                _ => RawField::Missing,
            };
            let mut problems = match item {
                Value::Object(o) => {
                    unknown_fields(Some(row), o, &ROW_FIELDS, "a comparison row").collect()
                }
                _ => vec![Problem::at(
                    Some(row),
                    "comparisons",
                    "must be an object with item_id, a, b and verdict",
                )],
            };
            let covariates =
                covariates::from_json(Some(row), item.get(covariates::FIELD), &mut problems);
            RawComparison {
                row,
                judge: envelope("judge"),
                rubric: envelope("rubric"),
                judge_version: envelope("judge_version"),
                item_id: field("item_id"),
                a: field("a"),
                b: field("b"),
                verdict: field("verdict"),
                verdict_swapped: field("verdict_swapped"),
                preference: field("preference"),
                rater: field("rater"),
                covariates,
                problems,
            }
        })
        .collect())
}

/// Reads a CSV upload with the header [`CSV_COLUMNS`]; rows may span any number of cells.
pub fn rows_from_csv(body: &[u8]) -> Result<Vec<RawComparison>, Vec<Problem>> {
    read_csv(
        body,
        &CSV_COLUMNS,
        &OPTIONAL_COLUMNS,
        "a comparison upload",
        |columns, record, row| {
            let field = |name: &str| columns.field(record, name);
            let (covariates, problems) = columns.covariates(record, row);
            RawComparison {
                row,
                judge: field("judge"),
                rubric: field("rubric"),
                judge_version: field("judge_version"),
                item_id: field("item_id"),
                a: field("a"),
                b: field("b"),
                verdict: field("verdict"),
                verdict_swapped: field("verdict_swapped"),
                preference: field("preference"),
                rater: field("rater"),
                covariates,
                problems,
            }
        },
    )
}

/// An outcome in a JSON field of row `row` (a silent-change check's re-judged verdict):
/// `None` where it is absent or null.
pub fn outcome_of(row: usize, name: &str, v: Option<&Value>) -> Result<Option<f64>, Problem> {
    match optional(RawField::from_json(v)) {
        RawField::Missing => Ok(None),
        f => outcome(row, name, &f).map(Some),
    }
}

/// An outcome: `"a"` (1), `"b"` (0), `"tie"` (½) or a number in [0, 1]; in text (a CSV cell,
/// a JSON string) the words exactly so, and a number only as a plain decimal with its point
/// (`0.75`, `1.0`). A bare `0` or `1` in text is refused: a file that numbers its answers 0
/// and 1 would otherwise be read backwards (1 is "a is better"), and `A`, `-0` or `1e0` are
/// not what the spec allows.
fn outcome(row: usize, name: &str, f: &RawField) -> Result<f64, Problem> {
    let bad = |what: String| Problem::at(Some(row), name, what);
    let x = match f {
        RawField::Number(x) => *x,
        RawField::Text(s) if s == "a" => 1.0,
        RawField::Text(s) if s == "b" => 0.0,
        RawField::Text(s) if s == "tie" => 0.5,
        RawField::Text(s) if s == "0" || s == "1" => {
            return Err(bad(format!(
                "{s:?} is ambiguous: write \"a\" or \"b\" for the better answer, or the probability that a is better \
                 with its decimal point ({s}.0); a file that numbers its answers 0 and 1 would be read backwards"
            )));
        }
        RawField::Text(s) if is_plain_decimal(s) => s
            .parse::<f64>()
            .map_err(|_| bad(format!("{s:?} is not a number")))?,
        RawField::Text(s) => {
            return Err(bad(format!(
                "{s:?} is not an outcome: \"a\", \"b\", \"tie\" (lower case) or the probability that a is better as a \
                 plain decimal (0.75)"
            )));
        }
        RawField::Missing => return Err(bad("is missing".into())),
        RawField::Other(kind) => {
            return Err(bad(format!(
                "must be \"a\", \"b\", \"tie\" or a number in [0, 1], not {kind}"
            )));
        }
    };
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(bad(format!(
            "{x} is outside [0, 1]: the probability that a is better"
        )))
    }
}

/// What a batch first says of an item: the row, its pair of systems, its preference.
type FirstSaid = (usize, GroupName, GroupName, Option<f64>);

/// Checks a whole batch: per-cell batches in (judge, rubric, version) order, or every problem.
pub fn validate(
    rows: Vec<RawComparison>,
    max_batch: usize,
) -> Result<Vec<ComparisonBatch>, Vec<Problem>> {
    batch_size(rows.len(), max_batch, "comparisons")?;
    let mut problems = Vec::new();
    let mut batches = ComparisonBatches::default();
    for mut raw in rows {
        problems.append(&mut raw.problems);
        let Some(fields) = ComparisonFields::of(&raw, &mut problems) else {
            continue;
        };
        if let Err(p) = batches.add(raw.row, fields, std::mem::take(&mut raw.covariates)) {
            problems.push(p);
        }
    }
    let cells = batches.finish();
    if problems.is_empty() {
        Ok(cells)
    } else {
        Err(problems)
    }
}

/// A row's fields, each parsed.
struct ComparisonFields {
    key: CellKey,
    version: Option<JudgeVersion>,
    item_id: ItemId,
    a: GroupName,
    b: GroupName,
    verdict: f64,
    swapped: Option<f64>,
    preference: Option<f64>,
    rater: Option<RaterName>,
}

impl ComparisonFields {
    /// The row's fields, or `None` with each field's problem added to `problems`.
    fn of(raw: &RawComparison, problems: &mut Vec<Problem>) -> Option<Self> {
        let row = raw.row;
        let outcome_or_none = |name: &str, f: &RawField| match f {
            RawField::Missing => Ok(None),
            f => outcome(row, name, f).map(Some),
        };
        let judge = ok(problems, name(row, "judge", &raw.judge, JudgeName::parse));
        let rubric = ok(
            problems,
            name(row, "rubric", &raw.rubric, RubricName::parse),
        );
        let version = optional_name(
            row,
            "judge_version",
            &raw.judge_version,
            JudgeVersion::parse,
        );
        let version = ok(problems, version);
        let item_id = ok(problems, name(row, "item_id", &raw.item_id, ItemId::parse));
        let a = ok(problems, name(row, "a", &raw.a, GroupName::parse));
        let b = ok(problems, name(row, "b", &raw.b, GroupName::parse));
        let verdict = ok(problems, outcome(row, "verdict", &raw.verdict));
        let swapped = ok(
            problems,
            outcome_or_none("verdict_swapped", &raw.verdict_swapped),
        );
        let preference = ok(problems, outcome_or_none("preference", &raw.preference));
        let rater = ok(
            problems,
            optional_name(row, "rater", &raw.rater, RaterName::parse),
        );
        let fields = Self {
            key: CellKey {
                judge: judge?,
                rubric: rubric?,
            },
            version: version?,
            item_id: item_id?,
            a: a?,
            b: b?,
            verdict: verdict?,
            swapped: swapped?,
            preference: preference?,
            rater: rater?,
        };
        if fields.a == fields.b {
            problems.push(Problem::at(
                Some(row),
                "b",
                format!(
                    "{} is also `a`: a comparison is of two different systems",
                    fields.a
                ),
            ));
            return None;
        }
        Some(fields)
    }
}

/// A batch's rows gathered per (cell, version), with what its later rows are checked against.
#[derive(Default)]
struct ComparisonBatches {
    /// Per (cell, version): its batch and each item's row. A batch holds few cells, so they
    /// are found by a scan that compares keys by reference: 100,000 rows clone no key to check
    /// one.
    cells: Vec<(ComparisonBatch, HashMap<ItemId, usize>)>,
    /// What the batch first says of each (cell, item), and where: its pair of systems and its
    /// preference, which every other row of the item must agree with.
    items: Vec<(CellKey, HashMap<ItemId, FirstSaid>)>,
}

impl ComparisonBatches {
    /// The index of the batch of `key` and `version`, begun where it is new.
    fn cell_of(&mut self, key: &CellKey, version: &Option<JudgeVersion>) -> usize {
        if let Some(at) = self
            .cells
            .iter()
            .position(|(c, _)| c.key == *key && c.judge_version == *version)
        {
            return at;
        }
        self.cells.push((
            ComparisonBatch {
                key: key.clone(),
                judge_version: version.clone(),
                comparisons: Vec::new(),
                rows: Vec::new(),
            },
            HashMap::new(),
        ));
        self.cells.len() - 1
    }

    /// Adds a row whose fields parsed, or says why it cannot be added.
    fn add(
        &mut self,
        row: usize,
        f: ComparisonFields,
        covariates: Covariates,
    ) -> Result<(), Problem> {
        let key = f.key;
        let at = self.cell_of(&key, &f.version);
        let (cell, cell_seen) = &mut self.cells[at];
        if let Some(&first) = cell_seen.get(&f.item_id) {
            return Err(Problem::at(
                Some(row),
                "item_id",
                format!(
                    "{:?} repeats row {first} for cell {key} and judge_version {}",
                    f.item_id.as_str(),
                    JudgeVersion::describe(f.version.as_ref())
                ),
            ));
        }
        cell_seen.insert(f.item_id.clone(), row);
        let cell_items = match self.items.iter().position(|(k, _)| *k == key) {
            Some(at) => &mut self.items[at].1,
            None => {
                self.items.push((key.clone(), HashMap::new()));
                &mut self.items.last_mut().expect("just pushed").1
            }
        };
        let (item_id, a, b, preference) = (f.item_id, f.a, f.b, f.preference);
        match cell_items.get_mut(&item_id) {
            Some((first, fa, fb, _)) if (fa.as_str(), fb.as_str()) != (a.as_str(), b.as_str()) => {
                return Err(Problem::at(
                    Some(row),
                    "a",
                    format!(
                        "item {:?} compares {fa} with {fb} in row {first}: an item compares one pair of systems, in one order, whichever judge version judged it",
                        item_id.as_str()
                    ),
                ));
            }
            Some((first, _, _, Some(p))) if preference.is_some_and(|q| q != *p) => {
                return Err(Problem::at(
                    Some(row),
                    "preference",
                    format!(
                        "differs from the preference {p} row {first} gives item {:?}: an item has one preference",
                        item_id.as_str()
                    ),
                ));
            }
            Some((_, _, _, p)) => {
                if p.is_none() {
                    *p = preference;
                }
            }
            None => {
                cell_items.insert(item_id.clone(), (row, a.clone(), b.clone(), preference));
            }
        }
        cell.comparisons.push(Comparison {
            item_id,
            a,
            b,
            verdict: f.verdict,
            verdict_swapped: f.swapped,
            preference,
            rater: f.rater,
            covariates,
        });
        cell.rows.push(row);
        Ok(())
    }

    /// The per-cell batches in (judge, rubric, version) order; a row without a preference
    /// takes the one another row of its item gave.
    fn finish(self) -> Vec<ComparisonBatch> {
        let mut cells: Vec<ComparisonBatch> =
            self.cells.into_iter().map(|(batch, _)| batch).collect();
        cells.sort_by(|a, b| (&a.key, &a.judge_version).cmp(&(&b.key, &b.judge_version)));
        for batch in &mut cells {
            let Some((_, said)) = self.items.iter().find(|(k, _)| *k == batch.key) else {
                continue;
            };
            for c in &mut batch.comparisons {
                if c.preference.is_none() {
                    c.preference = said.get(&c.item_id).and_then(|i| i.3);
                }
            }
        }
        cells
    }
}

/// A stored row of a batch's item: its judge version (`None`: unversioned) and comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredComparison {
    pub judge_version: Option<JudgeVersion>,
    pub comparison: Comparison,
}

/// What writing one cell's batch does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ComparisonPlan {
    /// Rows new to the cell.
    pub fresh: Vec<Comparison>,
    /// Rows that overwrite the stored row of their version (`replace`).
    pub replaced: Vec<Comparison>,
    pub unchanged: usize,
    /// Items whose every row takes this preference: a label for verdicts stored unlabelled,
    /// or (`replace`) a new one.
    pub preferences: Vec<(ItemId, f64)>,
    /// Rows stored unlabelled under the batch's judge version that the batch sends again with
    /// a preference: labelled (through `preferences`), their verdicts as stored.
    pub labelled: Vec<Comparison>,
}

/// Plans one cell's batch against the rows the cell holds for its items (of every version).
/// Conflicts (a row stored with other values without `replace`, another pair of systems, or
/// another preference) are returned, each naming the batch row and field.
pub fn plan(
    batch: &ComparisonBatch,
    stored: &[StoredComparison],
    replace: bool,
) -> Result<ComparisonPlan, Vec<Problem>> {
    let mut by_item: HashMap<&ItemId, Vec<&StoredComparison>> = HashMap::new();
    for s in stored {
        by_item.entry(&s.comparison.item_id).or_default().push(s);
    }
    let mut plan = ComparisonPlan::default();
    let mut conflicts = Vec::new();
    for (c, &row) in batch.comparisons.iter().zip(&batch.rows) {
        let rows = by_item.get(&c.item_id).map_or(&[][..], Vec::as_slice);
        let mut c = c.clone();
        if let Some(other) = rows.first()
            && (other.comparison.a.as_str(), other.comparison.b.as_str())
                != (c.a.as_str(), c.b.as_str())
        {
            conflicts.push(Problem::at(
                Some(row),
                "a",
                format!(
                    "item {:?} is stored comparing {} with {}: an item compares one pair of systems, in one order",
                    c.item_id.as_str(),
                    other.comparison.a,
                    other.comparison.b
                ),
            ));
            continue;
        }
        let held = rows.iter().find_map(|s| s.comparison.preference);
        match (c.preference, held) {
            (None, Some(p)) => c.preference = Some(p),
            (Some(p), Some(q)) if p != q && !replace => {
                conflicts.push(Problem::at(
                    Some(row),
                    "preference",
                    format!(
                        "{p} differs from the stored preference {q} of item {:?} (an item has one preference; ?replace=true sets it on all its rows)",
                        c.item_id.as_str()
                    ),
                ));
                continue;
            }
            (Some(p), q)
                if q != Some(p) && rows.iter().any(|s| s.judge_version != batch.judge_version) =>
            {
                plan.preferences.push((c.item_id.clone(), p));
            }
            _ => {}
        }
        match rows
            .iter()
            .find(|s| s.judge_version == batch.judge_version)
        {
            None => plan.fresh.push(c),
            Some(s) if s.comparison == c => plan.unchanged += 1,
            // The same verdict sent again with the people's preference: a label, the ordinary
            // way a labelling team sends the verdicts it was given back.
            Some(s)
                if s.comparison.preference.is_none()
                    && Comparison {
                        preference: None,
                        ..c.clone()
                    } == s.comparison =>
            {
                if let Some(p) = c.preference
                    && !plan.preferences.iter().any(|(item, _)| item == &c.item_id)
                {
                    plan.preferences.push((c.item_id.clone(), p));
                }
                plan.labelled.push(c);
            }
            Some(_) if replace => plan.replaced.push(c),
            Some(s) => conflicts.push(Problem::at(
                Some(row),
                "verdict",
                format!(
                    "item {:?} is stored for judge_version {} with other values (verdict {}, verdict_swapped {:?}, preference {:?}); send ?replace=true to overwrite it",
                    c.item_id.as_str(),
                    JudgeVersion::describe(batch.judge_version.as_ref()),
                    s.comparison.verdict,
                    s.comparison.verdict_swapped,
                    s.comparison.preference
                ),
            )),
        }
    }
    if conflicts.is_empty() {
        Ok(plan)
    } else {
        Err(conflicts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn batch(body: Value) -> Result<Vec<ComparisonBatch>, Vec<Problem>> {
        validate(rows_from_json(&body)?, 1000)
    }

    fn named(problems: &[Problem]) -> Vec<(Option<usize>, &str)> {
        problems.iter().map(|p| (p.row, p.field.as_str())).collect()
    }

    #[test]
    fn outcomes_read_as_the_probability_that_a_is_better() {
        let cells = batch(json!({"judge": "gpt", "rubric": "help", "comparisons": [
            {"item_id": "p1", "a": "m1", "b": "m2", "verdict": "a", "verdict_swapped": "tie", "preference": "b"},
            {"item_id": "p2", "a": "m1", "b": "m3", "verdict": 0.25, "covariates": {"length_diff": 120}},
        ]}))
        .expect("valid");
        assert_eq!(cells.len(), 1);
        let c = &cells[0].comparisons;
        assert_eq!(
            (c[0].verdict, c[0].verdict_swapped, c[0].preference),
            (1.0, Some(0.5), Some(0.0))
        );
        assert_eq!((c[1].verdict, c[1].preference), (0.25, None));
        assert_eq!(c[1].covariates.len(), 1);
        let csv = b"judge,rubric,item_id,a,b,verdict,preference,judge_version\n\
            gpt,help,p1,m1,m2,b,0.7,v2\n";
        let cells = validate(rows_from_csv(csv).expect("header"), 10).expect("valid");
        assert_eq!(
            cells[0].judge_version.as_ref().map(JudgeVersion::as_str),
            Some("v2")
        );
        assert_eq!(
            (
                cells[0].comparisons[0].verdict,
                cells[0].comparisons[0].preference
            ),
            (0.0, Some(0.7))
        );
    }

    #[test]
    fn every_bad_row_and_field_is_named_and_nothing_passes() {
        let problems = batch(json!({"judge": "gpt", "rubric": "help", "comparisons": [
            {"item_id": "p1", "a": "m1", "b": "m1", "verdict": "a"},
            {"item_id": "p2", "a": "m1", "b": "m2", "verdict": "left", "preference": 1.5},
            {"item_id": "p3", "a": "m1", "verdict": "a", "verdit_swapped": "b"},
            {"item_id": "p4", "a": "m1", "b": "m2", "verdict": true},
            {"item_id": "p4", "a": "m1", "b": "m2", "verdict": "b"},
            {"item_id": "p5", "a": "m2", "b": "m1", "verdict": "b", "preference": "a"},
        ]}))
        .expect_err("refused");
        assert_eq!(
            named(&problems),
            [
                (Some(1), "b"),
                (Some(2), "verdict"),
                (Some(2), "preference"),
                (Some(3), "verdit_swapped"),
                (Some(3), "b"),
                (Some(4), "verdict"),
            ]
        );
        // A repeated item, and one item given two pairs or two preferences across versions.
        let problems = validate(
            rows_from_csv(
                b"judge,rubric,item_id,a,b,verdict,preference,judge_version\n\
                  gpt,help,p1,m1,m2,a,1.0,\n\
                  gpt,help,p1,m1,m2,b,,\n\
                  gpt,help,p1,m2,m1,a,,v2\n\
                  gpt,help,p1,m1,m2,a,0.0,v3\n",
            )
            .expect("header"),
            10,
        )
        .expect_err("refused");
        assert_eq!(
            named(&problems),
            [
                (Some(2), "item_id"),
                (Some(3), "a"),
                (Some(4), "preference")
            ]
        );
        let header = rows_from_csv(b"judge,rubric,item_id,a,b,verdit\n").expect_err("refused");
        assert_eq!(named(&header), [(None, "verdict"), (None, "verdit")]);
    }

    /// The spec's outcomes only: the words in lower case, numbers as JSON numbers or plain
    /// decimals. A bare 0 or 1 in text is ambiguous (is 0 the first answer?) and refused.
    #[test]
    fn outcomes_are_read_strictly() {
        for bad in [
            "A", "Tie", "TIE", "1", "0", "-0", "1e0", "+0.5", "0.5.1", ".", "0,5",
        ] {
            let problems = batch(json!({"judge": "gpt", "rubric": "help", "comparisons": [
                {"item_id": "p1", "a": "m1", "b": "m2", "verdict": bad},
            ]}))
            .expect_err(bad);
            assert_eq!(named(&problems), [(Some(1), "verdict")], "{bad}");
        }
        let ambiguous = rows_from_csv(
            b"judge,rubric,item_id,a,b,verdict
gpt,help,p1,m1,m2,1
",
        )
        .map(|rows| validate(rows, 10))
        .expect("header")
        .expect_err("refused");
        assert!(ambiguous[0].problem.contains("ambiguous"), "{ambiguous:?}");
        for (good, x) in [("0.75", 0.75), ("1.0", 1.0), (".5", 0.5), ("0.0", 0.0)] {
            let cells = batch(json!({"judge": "gpt", "rubric": "help", "comparisons": [
                {"item_id": "p1", "a": "m1", "b": "m2", "verdict": good, "preference": 1},
            ]}))
            .expect(good);
            assert_eq!(cells[0].comparisons[0].verdict, x);
            assert_eq!(cells[0].comparisons[0].preference, Some(1.0));
        }
    }

    fn stored(version: Option<&str>, c: &Comparison) -> StoredComparison {
        StoredComparison {
            judge_version: version.map(|v| JudgeVersion::parse(v).unwrap()),
            comparison: c.clone(),
        }
    }

    #[test]
    fn a_plan_keeps_what_is_stored_and_labels_verdicts_stored_unlabelled() {
        let cells = batch(json!({"judge": "gpt", "rubric": "help", "comparisons": [
            {"item_id": "p1", "a": "m1", "b": "m2", "verdict": "a", "preference": "a"},
            {"item_id": "p2", "a": "m1", "b": "m2", "verdict": "b"},
            {"item_id": "p3", "a": "m1", "b": "m2", "verdict": "a"},
        ]}))
        .expect("valid");
        let b = &cells[0];
        let [p1, p2, p3] = [0, 1, 2].map(|i| b.comparisons[i].clone());
        // p1 stored unlabelled by another version; p2 stored as sent; p3 stored otherwise.
        let unlabelled = Comparison {
            preference: None,
            ..p1.clone()
        };
        let other = Comparison {
            verdict: 0.5,
            ..p3.clone()
        };
        let rows = [
            stored(Some("v0"), &unlabelled),
            stored(None, &p2),
            stored(None, &other),
        ];
        let conflicts = plan(b, &rows, false).expect_err("p3 differs");
        assert_eq!(named(&conflicts), [(Some(3), "verdict")]);
        let done = plan(b, &rows, true).expect("replaced");
        assert_eq!(done.fresh, std::slice::from_ref(&p1));
        assert_eq!((done.unchanged, done.replaced.len()), (1, 1));
        assert_eq!(done.preferences, [(p1.item_id.clone(), 1.0)]);
        // A stored item compared the other way round is refused by field `a`.
        let flipped = Comparison {
            a: p2.b.clone(),
            b: p2.a.clone(),
            ..p2.clone()
        };
        let conflicts = plan(b, &[stored(Some("v0"), &flipped)], true).expect_err("flipped");
        assert_eq!(named(&conflicts), [(Some(2), "a")]);
    }

    #[test]
    fn a_verdict_sent_again_with_a_preference_labels_the_stored_row() {
        let cells = batch(json!({"judge": "gpt", "rubric": "help", "comparisons": [
            {"item_id": "p1", "a": "m1", "b": "m2", "verdict": "a", "preference": "b"},
            {"item_id": "p2", "a": "m1", "b": "m2", "verdict": "b", "preference": "tie"},
        ]}))
        .expect("valid");
        let b = &cells[0];
        let [p1, p2] = [0, 1].map(|i| b.comparisons[i].clone());
        let unlabelled = |c: &Comparison| Comparison {
            preference: None,
            ..c.clone()
        };
        // p1 stored unlabelled under this version only; p2 under this version and another.
        let rows = [
            stored(None, &unlabelled(&p1)),
            stored(None, &unlabelled(&p2)),
            stored(Some("v0"), &unlabelled(&p2)),
        ];
        let done = plan(b, &rows, false).expect("a label is no conflict");
        assert_eq!(done.labelled, [p1.clone(), p2.clone()]);
        assert_eq!(
            done.preferences,
            [(p1.item_id.clone(), 0.0), (p2.item_id.clone(), 0.5)]
        );
        assert_eq!(
            (done.fresh.len(), done.unchanged, done.replaced.len()),
            (0, 0, 0)
        );
        // Another verdict with the label is still a change to be replaced.
        let changed = [stored(
            None,
            &unlabelled(&Comparison {
                verdict: 0.5,
                ..p1.clone()
            }),
        )];
        let conflicts = plan(b, &changed, false).expect_err("the verdict differs");
        assert_eq!(named(&conflicts), [(Some(1), "verdict")]);
    }
}
