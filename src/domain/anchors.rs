//! Anchor batches: from an uploaded body (JSON envelope or CSV) to validated per-cell batches.
//! Every row is checked before anything is stored, and every problem is reported with its row
//! and field, so a labelling team can fix the whole file in one pass.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::covariates::{self, Covariates};
use super::raw::{
    RawField, batch_size, name, ok, optional_name, read_csv, text_field, unknown_fields,
};
use super::repeats;
use super::{
    Anchor, CellKey, GroupName, ItemId, JudgeName, JudgeVersion, Problem, RaterName, RubricName,
    Scale,
};

/// The optional column naming each anchor's group (the system whose output was judged).
pub const GROUP_COLUMN: &str = "group";
/// The optional column naming who labelled each anchor's reference.
pub const RATER_COLUMN: &str = "rater";
/// The optional column naming the judge version that gave each score.
pub const JUDGE_VERSION_COLUMN: &str = "judge_version";

/// The columns a CSV upload must have (in any order; besides them only [`OPTIONAL_COLUMNS`],
/// and any other column is refused by name, so that a misspelt one is never dropped
/// silently). A `reference_score` may be left empty on a row whose item the cell already
/// holds a reference for (a re-scored item).
pub const CSV_COLUMNS: [&str; 5] = [
    "judge",
    "rubric",
    "item_id",
    "judge_score",
    "reference_score",
];

/// The optional columns of a CSV upload, and optional fields of a JSON anchor row; a CSV may
/// also have any number of covariate columns, `covariate.<name>`.
pub const OPTIONAL_COLUMNS: [&str; 4] = [
    GROUP_COLUMN,
    RATER_COLUMN,
    JUDGE_VERSION_COLUMN,
    repeats::FIELD,
];

/// The fields a JSON anchor row may have.
const ROW_FIELDS: [&str; 8] = [
    "item_id",
    "judge_score",
    "reference_score",
    GROUP_COLUMN,
    RATER_COLUMN,
    JUDGE_VERSION_COLUMN,
    covariates::FIELD,
    repeats::FIELD,
];

/// The fields of the JSON envelope.
const ENVELOPE_FIELDS: [&str; 4] = ["judge", "rubric", JUDGE_VERSION_COLUMN, "anchors"];

/// One anchor row as uploaded, with its 1-based position in the batch.
#[derive(Debug, Clone)]
pub struct RawAnchor {
    pub row: usize,
    pub judge: RawField,
    pub rubric: RawField,
    pub item_id: RawField,
    pub judge_score: RawField,
    pub reference_score: RawField,
    /// Optional: `Missing` (or JSON null) is no group.
    pub group: RawField,
    /// Optional: `Missing` (or JSON null) is no rater named.
    pub rater: RawField,
    /// Optional: `Missing` (or JSON null) is an unversioned score.
    pub judge_version: RawField,
    /// Its covariates, read and checked (their problems are in `problems`).
    pub covariates: Covariates,
    /// Its further scores by the same judge version, read and checked.
    pub repeats: Vec<f64>,
    /// Problems found while reading the row (a field the row may not have, a bad covariate),
    /// reported with the rest of the batch's.
    pub problems: Vec<Problem>,
}

/// One validated row of an upload. `reference_score` is `None` on a re-scored item whose
/// reference the store must supply (or refuse the row).
#[derive(Debug, Clone, PartialEq)]
pub struct Uploaded {
    pub item_id: ItemId,
    pub judge_score: f64,
    pub reference_score: Option<f64>,
    pub group: Option<GroupName>,
    pub rater: Option<RaterName>,
    pub covariates: Covariates,
    /// Further scores of the item by the same judge version (the row's own, never its item's).
    pub repeats: Vec<f64>,
}

impl Uploaded {
    /// The anchor this row becomes, given the reference (and, for a re-scored row, the group,
    /// rater and covariates) the cell holds for its item.
    pub fn anchor(
        &self,
        judge_version: Option<&JudgeVersion>,
        stored: Option<(f64, Option<&GroupName>, Option<&RaterName>, &Covariates)>,
    ) -> Option<Anchor> {
        let (reference_score, group, rater, covariates) = match (self.reference_score, stored) {
            (Some(y), _) => (
                y,
                self.group.clone(),
                self.rater.clone(),
                self.covariates.clone(),
            ),
            (None, Some((y, g, r, c))) => (
                y,
                self.group.clone().or_else(|| g.cloned()),
                self.rater.clone().or_else(|| r.cloned()),
                if self.covariates.is_empty() {
                    c.clone()
                } else {
                    self.covariates.clone()
                },
            ),
            (None, None) => return None,
        };
        Some(Anchor {
            item_id: self.item_id.clone(),
            judge_score: self.judge_score,
            reference_score,
            group,
            rater,
            judge_version: judge_version.cloned(),
            reference_at_ms: None,
            covariates,
            repeats: self.repeats.clone(),
        })
    }
}

/// One cell's validated rows of one judge version.
#[derive(Debug, Clone)]
pub struct CellBatch {
    pub key: CellKey,
    pub judge_version: Option<JudgeVersion>,
    pub anchors: Vec<Uploaded>,
    /// The 1-based batch row of each anchor, to name rows in later errors (conflicts).
    pub rows: Vec<usize>,
}

/// Reads the JSON envelope `{"judge", "rubric", "judge_version"?, "anchors": [...]}`.
/// Envelope-level problems have no row; the judge and rubric apply to every anchor, the
/// envelope's `judge_version` to every anchor that names none of its own.
pub fn rows_from_json(body: &Value) -> Result<Vec<RawAnchor>, Vec<Problem>> {
    let Some(obj) = body.as_object() else {
        return Err(vec![Problem::at(
            None,
            "body",
            "must be a JSON object with judge, rubric and anchors",
        )]);
    };
    // The envelope's judge and rubric apply to every row: check them once, without a row.
    let mut problems: Vec<Problem> =
        unknown_fields(None, obj, &ENVELOPE_FIELDS, "the anchor batch").collect();
    let judge = text_field(None, "judge", &RawField::from_json(obj.get("judge")))
        .and_then(|s| {
            JudgeName::parse(&s)
                .map(|_| s)
                .map_err(|e| Problem::at(None, "judge", e))
        })
        .map_err(|p| problems.push(p))
        .ok();
    let rubric = text_field(None, "rubric", &RawField::from_json(obj.get("rubric")))
        .and_then(|s| {
            RubricName::parse(&s)
                .map(|_| s)
                .map_err(|e| Problem::at(None, "rubric", e))
        })
        .map_err(|p| problems.push(p))
        .ok();
    let version = match RawField::from_json(obj.get(JUDGE_VERSION_COLUMN)) {
        RawField::Missing | RawField::Other("null") => RawField::Missing,
        f => match text_field(None, JUDGE_VERSION_COLUMN, &f).and_then(|s| {
            JudgeVersion::parse(&s).map_err(|e| Problem::at(None, JUDGE_VERSION_COLUMN, e))
        }) {
            Ok(v) => RawField::Text(v.as_str().to_owned()),
            Err(p) => {
                problems.push(p);
                RawField::Missing
            }
        },
    };
    let items = match obj.get("anchors") {
        Some(Value::Array(items)) => Some(items),
        Some(_) => {
            problems.push(Problem::at(None, "anchors", "must be an array"));
            None
        }
        None => {
            problems.push(Problem::at(None, "anchors", "is missing"));
            None
        }
    };
    let (Some(judge), Some(rubric), Some(items), true) =
        (judge, rubric, items, problems.is_empty())
    else {
        return Err(problems);
    };
    let (judge, rubric) = (RawField::Text(judge), RawField::Text(rubric));
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, item)| json_row(i + 1, item, [&judge, &rubric, &version]))
        .collect())
}

/// Row `row` of a JSON batch, with the envelope's judge, rubric and judge version (taken where
/// the row names none of its own).
fn json_row(row: usize, item: &Value, [judge, rubric, version]: [&RawField; 3]) -> RawAnchor {
    let i = row - 1;
    let field = |name: &str| match item {
        Value::Object(o) => RawField::from_json(o.get(name)),
        _ => RawField::Missing,
    };
    let mut problems = match item {
        Value::Object(o) => unknown_fields(Some(i + 1), o, &ROW_FIELDS, "an anchor row").collect(),
        _ => vec![Problem::at(
            Some(i + 1),
            "anchors",
            "must be an object with item_id, judge_score and reference_score",
        )],
    };
    let covariates = covariates::from_json(Some(i + 1), item.get(covariates::FIELD), &mut problems);
    let repeats = repeats::from_json(Some(i + 1), repeats::FIELD, item.get(repeats::FIELD))
        .unwrap_or_else(|p| {
            problems.push(p);
            Vec::new()
        });
    RawAnchor {
        covariates,
        repeats,
        problems,
        row: i + 1,
        judge: judge.clone(),
        rubric: rubric.clone(),
        item_id: field("item_id"),
        judge_score: field("judge_score"),
        group: match field("group") {
            RawField::Other("null") => RawField::Missing,
            other => other,
        },
        rater: match field(RATER_COLUMN) {
            RawField::Other("null") => RawField::Missing,
            other => other,
        },
        judge_version: match field(JUDGE_VERSION_COLUMN) {
            RawField::Other("null") | RawField::Missing => version.clone(),
            other => other,
        },
        reference_score: match field("reference_score") {
            RawField::Other("null") => RawField::Missing,
            other => other,
        },
    }
}

/// Reads a CSV upload with the header [`CSV_COLUMNS`]; rows may span any number of cells.
pub fn rows_from_csv(body: &[u8]) -> Result<Vec<RawAnchor>, Vec<Problem>> {
    read_csv(
        body,
        &CSV_COLUMNS,
        &OPTIONAL_COLUMNS,
        "an anchor upload",
        |columns, record, row| {
            let field = |name: &str| columns.field(record, name);
            let (covariates, mut problems) = columns.covariates(record, row);
            let repeats = repeats::from_csv(row, &field(repeats::FIELD)).unwrap_or_else(|p| {
                problems.push(p);
                Vec::new()
            });
            RawAnchor {
                covariates,
                repeats,
                problems,
                row,
                judge: field("judge"),
                rubric: field("rubric"),
                item_id: field("item_id"),
                judge_score: field("judge_score"),
                reference_score: field("reference_score"),
                group: field(GROUP_COLUMN),
                rater: field(RATER_COLUMN),
                judge_version: field(JUDGE_VERSION_COLUMN),
            }
        },
    )
}

fn score_field(row: usize, name: &str, f: &RawField) -> Result<f64, Problem> {
    let x = match f {
        RawField::Number(x) => *x,
        RawField::Text(s) => s
            .parse::<f64>()
            .map_err(|_| Problem::at(Some(row), name, format!("{s:?} is not a number")))?,
        RawField::Missing => return Err(Problem::at(Some(row), name, "is missing")),
        RawField::Other(kind) => {
            return Err(Problem::at(
                Some(row),
                name,
                format!("must be a number, not {kind}"),
            ));
        }
    };
    super::bounded(x).map_err(|e| Problem::at(Some(row), name, e))
}

/// The rubric names a batch refers to, so the caller can look their scales up first.
pub fn rubric_names(rows: &[RawAnchor]) -> Vec<RubricName> {
    let mut names: Vec<RubricName> = rows
        .iter()
        .filter_map(|r| match &r.rubric {
            RawField::Text(s) => RubricName::parse(s).ok(),
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Checks a whole batch. `scales` holds the known rubrics; others get [`Scale::DEFAULT`].
/// Returns the per-cell batches in (judge, rubric) order, or every problem found.
pub fn validate(
    rows: Vec<RawAnchor>,
    scales: &HashMap<RubricName, Scale>,
    max_batch: usize,
) -> Result<Vec<CellBatch>, Vec<Problem>> {
    batch_size(rows.len(), max_batch, "anchors")?;
    let mut problems = Vec::new();
    let mut batches = Batches::default();
    for mut raw in rows {
        problems.append(&mut raw.problems);
        let Some(fields) = AnchorFields::of(&raw, scales, &mut problems) else {
            continue;
        };
        if let Err(p) = batches.add(raw, fields) {
            problems.push(p);
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(batches.finish())
}

/// A row's fields, each parsed.
struct AnchorFields {
    key: CellKey,
    item_id: ItemId,
    judge_score: f64,
    reference_score: Option<f64>,
    group: Option<GroupName>,
    judge_version: Option<JudgeVersion>,
    rater: Option<RaterName>,
}

impl AnchorFields {
    /// The row's fields, or `None` with each field's problem added to `problems`.
    fn of(
        raw: &RawAnchor,
        scales: &HashMap<RubricName, Scale>,
        problems: &mut Vec<Problem>,
    ) -> Option<Self> {
        let row = raw.row;
        let judge = ok(problems, name(row, "judge", &raw.judge, JudgeName::parse));
        let rubric = ok(
            problems,
            name(row, "rubric", &raw.rubric, RubricName::parse),
        );
        let item_id = ok(problems, name(row, "item_id", &raw.item_id, ItemId::parse));
        let judge_score = ok(problems, score_field(row, "judge_score", &raw.judge_score));
        let reference_score = match &raw.reference_score {
            RawField::Missing => Ok(None),
            f => score_field(row, "reference_score", f).and_then(|y| {
                let Some(rubric) = &rubric else {
                    return Ok(Some(y));
                };
                let scale = scales.get(rubric).copied().unwrap_or(Scale::DEFAULT);
                if scale.contains(y) {
                    Ok(Some(y))
                } else {
                    Err(Problem::at(
                        Some(row),
                        "reference_score",
                        format!(
                            "{y} is outside rubric {rubric}'s scale [{}, {}]",
                            scale.min, scale.max
                        ),
                    ))
                }
            }),
        };
        let reference_score = ok(problems, reference_score);
        let group = ok(
            problems,
            optional_name(row, "group", &raw.group, GroupName::parse),
        );
        let judge_version = optional_name(
            row,
            JUDGE_VERSION_COLUMN,
            &raw.judge_version,
            JudgeVersion::parse,
        );
        let judge_version = ok(problems, judge_version);
        let rater = ok(
            problems,
            optional_name(row, RATER_COLUMN, &raw.rater, RaterName::parse),
        );
        Some(Self {
            key: CellKey {
                judge: judge?,
                rubric: rubric?,
            },
            item_id: item_id?,
            judge_score: judge_score?,
            reference_score: reference_score?,
            group: group?,
            judge_version: judge_version?,
            rater: rater?,
        })
    }
}

/// A batch's rows gathered per (cell, judge version), with what its later rows are checked
/// against.
#[derive(Default)]
struct Batches {
    cells: BTreeMap<(CellKey, Option<JudgeVersion>), CellBatch>,
    /// First row each (cell, version, item) was seen in, to report duplicates against it.
    seen: HashMap<(CellKey, Option<JudgeVersion>, ItemId), usize>,
    /// The first reference each (cell, item) was given in the batch, and its row: a re-scored
    /// row of another version takes it, and a different one is refused.
    references: HashMap<(CellKey, ItemId), (f64, usize)>,
}

impl Batches {
    /// Adds a row whose fields parsed, or says why it cannot be added.
    fn add(&mut self, raw: RawAnchor, f: AnchorFields) -> Result<(), Problem> {
        let row = raw.row;
        let slot = (f.key.clone(), f.judge_version.clone(), f.item_id.clone());
        if let Some(first) = self.seen.insert(slot.clone(), row) {
            self.seen.insert(slot, first);
            return Err(Problem::at(
                Some(row),
                "item_id",
                format!(
                    "{:?} repeats row {first} for cell {} and judge_version {}",
                    f.item_id.as_str(),
                    f.key,
                    JudgeVersion::describe(f.judge_version.as_ref())
                ),
            ));
        }
        if let Some(y) = f.reference_score {
            let item = (f.key.clone(), f.item_id.clone());
            match self.references.get(&item) {
                Some(&(first, first_row)) if first != y => {
                    return Err(Problem::at(
                        Some(row),
                        "reference_score",
                        format!(
                            "{y} differs from the reference {first} row {first_row} gives item {:?}: \
                             an item has one reference whichever judge version scored it",
                            f.item_id.as_str()
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    self.references.insert(item, (y, row));
                }
            }
        }
        let cell = self
            .cells
            .entry((f.key.clone(), f.judge_version.clone()))
            .or_insert_with(|| CellBatch {
                key: f.key,
                judge_version: f.judge_version,
                anchors: Vec::new(),
                rows: Vec::new(),
            });
        cell.anchors.push(Uploaded {
            item_id: f.item_id,
            judge_score: f.judge_score,
            reference_score: f.reference_score,
            group: f.group,
            rater: f.rater,
            covariates: raw.covariates,
            repeats: raw.repeats,
        });
        cell.rows.push(row);
        Ok(())
    }

    /// The per-cell batches; a re-scored row takes the reference another row of the batch
    /// gives its item.
    fn finish(self) -> Vec<CellBatch> {
        let mut cells: Vec<CellBatch> = self.cells.into_values().collect();
        for cell in &mut cells {
            for a in &mut cell.anchors {
                if a.reference_score.is_none() {
                    let item = (cell.key.clone(), a.item_id.clone());
                    a.reference_score = self.references.get(&item).map(|&(y, _)| y);
                }
            }
        }
        cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_scales() -> HashMap<RubricName, Scale> {
        HashMap::new()
    }

    #[test]
    fn json_batch_with_good_rows_becomes_one_cell() {
        let body = json!({"judge": "j1", "rubric": "r1", "anchors": [
            {"item_id": "a", "judge_score": 3.25, "reference_score": 4.0},
            {"item_id": "b", "judge_score": "2", "reference_score": 1}
        ]});
        let cells = validate(rows_from_json(&body).unwrap(), &no_scales(), 10).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].anchors[1].judge_score, 2.0);
        assert_eq!(cells[0].rows, vec![1, 2]);
    }

    #[test]
    fn every_problem_is_listed_with_row_and_field() {
        let body = json!({"judge": "j1", "rubric": "r1", "anchors": [
            {"item_id": "a", "judge_score": 3, "reference_score": 4},
            {"item_id": "b", "reference_score": 9},
            {"item_id": "a", "judge_score": "x", "reference_score": 2},
            {"item_id": "c", "judge_score": 3, "reference_score": 4}
        ]});
        let problems = validate(rows_from_json(&body).unwrap(), &no_scales(), 10).unwrap_err();
        let got: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Some(2), "judge_score"),
                (Some(2), "reference_score"),
                (Some(3), "judge_score")
            ]
        );
        assert!(
            problems[1]
                .problem
                .contains("outside rubric r1's scale [1, 5]")
        );
    }

    #[test]
    fn repeated_item_in_one_cell_names_the_first_row() {
        let body = json!({"judge": "j1", "rubric": "r1", "anchors": [
            {"item_id": "a", "judge_score": 3, "reference_score": 4},
            {"item_id": "a", "judge_score": 3, "reference_score": 4}
        ]});
        let problems = validate(rows_from_json(&body).unwrap(), &no_scales(), 10).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].row, Some(2));
        assert!(
            problems[0].problem.contains("repeats row 1"),
            "{}",
            problems[0].problem
        );
    }

    #[test]
    fn csv_spans_cells_and_uses_known_scales() {
        let csv = "judge,rubric,item_id,judge_score,reference_score\n\
                   j1,r1,a,3,4\n\
                   j1,r2,a,3,40\n\
                   j2,r1,a,NaN,4\n";
        let mut scales = no_scales();
        scales.insert(
            RubricName::parse("r2").unwrap(),
            Scale::new(0.0, 100.0).unwrap(),
        );
        let rows = rows_from_csv(csv.as_bytes()).unwrap();
        let problems = validate(rows.clone(), &scales, 10).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(
            (problems[0].row, problems[0].field.as_str()),
            (Some(3), "judge_score")
        );
        let ok = validate(rows[..2].to_vec(), &scales, 10).unwrap();
        assert_eq!(ok.len(), 2);
    }

    #[test]
    fn groups_are_optional_and_validated_like_names() {
        let body = json!({"judge": "j1", "rubric": "r1", "anchors": [
            {"item_id": "a", "judge_score": 3, "reference_score": 4, "group": "gpt-4o"},
            {"item_id": "b", "judge_score": 3, "reference_score": 4, "group": null},
            {"item_id": "c", "judge_score": 3, "reference_score": 4}
        ]});
        let cells = validate(rows_from_json(&body).unwrap(), &no_scales(), 10).unwrap();
        let groups: Vec<Option<&str>> = cells[0]
            .anchors
            .iter()
            .map(|a| a.group.as_ref().map(|g| g.as_str()))
            .collect();
        assert_eq!(groups, vec![Some("gpt-4o"), None, None]);
        let bad = json!({"judge": "j1", "rubric": "r1", "anchors": [
            {"item_id": "a", "judge_score": 3, "reference_score": 4, "group": "no spaces"},
            {"item_id": "b", "judge_score": 3, "reference_score": 4, "group": 7}
        ]});
        let problems = validate(rows_from_json(&bad).unwrap(), &no_scales(), 10).unwrap_err();
        let got: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(got, vec![(Some(1), "group"), (Some(2), "group")]);
        // CSV: the column is optional; an empty cell is no group.
        let csv = "judge,rubric,item_id,judge_score,reference_score,group\n\
                   j1,r1,a,3,4,BART\n\
                   j1,r1,b,3,4,\n";
        let cells = validate(rows_from_csv(csv.as_bytes()).unwrap(), &no_scales(), 10).unwrap();
        assert_eq!(cells[0].anchors[0].group.as_ref().unwrap().as_str(), "BART");
        assert!(cells[0].anchors[1].group.is_none());
    }

    #[test]
    fn raters_are_optional_and_validated_like_names() {
        let body = json!({"judge": "j1", "rubric": "r1", "anchors": [
            {"item_id": "a", "judge_score": 3, "reference_score": 4, "rater": "ann"},
            {"item_id": "b", "judge_score": 3, "reference_score": 4, "rater": null},
            {"item_id": "c", "judge_score": 3, "reference_score": 4, "rater": ["ann"]},
            {"item_id": "d", "judge_score": 3, "reference_score": 4, "rater": "two words"}
        ]});
        let problems = validate(rows_from_json(&body).unwrap(), &no_scales(), 10).unwrap_err();
        let got: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(got, vec![(Some(3), "rater"), (Some(4), "rater")]);
        let csv = "judge,rubric,item_id,judge_score,reference_score,rater\n\
                   j1,r1,a,3,4,ann\n\
                   j1,r1,b,3,4,\n";
        let cells = validate(rows_from_csv(csv.as_bytes()).unwrap(), &no_scales(), 10).unwrap();
        let raters: Vec<Option<&str>> = cells[0]
            .anchors
            .iter()
            .map(|a| a.rater.as_ref().map(|r| r.as_str()))
            .collect();
        assert_eq!(raters, vec![Some("ann"), None]);
    }

    #[test]
    fn csv_header_must_name_every_column() {
        let problems = rows_from_csv(b"judge,rubric,item_id,judge_score\nj,r,a,1\n").unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field, "reference_score");
    }

    #[test]
    fn oversized_and_empty_batches_are_refused_before_row_checks() {
        let body = json!({"judge": "j1", "rubric": "r1", "anchors": [
            {"item_id": "a", "judge_score": 3, "reference_score": 4},
            {"item_id": "b", "judge_score": 3, "reference_score": 4}
        ]});
        let problems = validate(rows_from_json(&body).unwrap(), &no_scales(), 1).unwrap_err();
        assert!(problems[0].problem.contains("limit is 1"));
        let empty = json!({"judge": "j1", "rubric": "r1", "anchors": []});
        assert!(validate(rows_from_json(&empty).unwrap(), &no_scales(), 1).is_err());
    }

    #[test]
    fn envelope_problems_are_reported_once_without_a_row() {
        let body = json!({"rubric": "bad name", "anchors": [
            {"item_id": "a", "judge_score": 3, "reference_score": 4},
            {"item_id": "b", "judge_score": 3, "reference_score": 4}
        ]});
        let problems = rows_from_json(&body).unwrap_err();
        let got: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(got, vec![(None, "judge"), (None, "rubric")]);
        assert!(rows_from_json(&json!([1, 2])).is_err());
    }
}
