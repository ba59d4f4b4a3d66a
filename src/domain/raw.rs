//! Upload rows as they arrived, before validation, shared by anchor and comparison uploads:
//! a field's raw value, a JSON row's unknown fields, and a CSV header with its covariate
//! columns.

use std::collections::HashMap;

use super::Problem;
use super::covariates::{self, Covariates};
use serde_json::Value;

/// A CSV upload's header, checked: where each column is, and its covariate columns
/// (`covariate.<name>`, each name once). Any other column is refused by name, so that a
/// misspelt one is never dropped silently.
pub struct CsvHeader {
    index: HashMap<String, usize>,
    covariates: Vec<(usize, String)>,
}

impl CsvHeader {
    /// Checks `header` for the `required` columns; besides them only `optional` ones and
    /// covariates may appear. `what` names the upload in problems.
    pub fn read(
        header: &csv::StringRecord,
        required: &[&str],
        optional: &[&str],
        what: &str,
    ) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        for column in required {
            if !header.iter().any(|h| h == *column) {
                problems.push(Problem::at(
                    None,
                    column,
                    format!(
                        "column missing from the CSV header (expected {})",
                        required.join(",")
                    ),
                ));
            }
        }
        let mut covariate_columns: Vec<(usize, String)> = Vec::new();
        for (i, column) in header.iter().enumerate() {
            if let Some(name) = column.strip_prefix(covariates::CSV_PREFIX) {
                match covariates::check_name(None, name) {
                    Err(p) => problems.push(p),
                    Ok(_) if covariate_columns.iter().any(|(_, n)| n == name) => problems.push(
                        Problem::at(None, column, "is a column twice; each covariate once"),
                    ),
                    Ok(_) => covariate_columns.push((i, name.to_owned())),
                }
            } else if !required.contains(&column) && !optional.contains(&column) {
                problems.push(Problem::at(
                    None,
                    column,
                    format!(
                        "is not a column of {what} (its columns: {}, and optionally {} and {}<name> per covariate)",
                        required.join(","),
                        optional.join(","),
                        covariates::CSV_PREFIX
                    ),
                ));
            }
        }
        if covariate_columns.len() > covariates::MAX_PER_ROW {
            problems.push(Problem::at(
                None,
                "header",
                format!(
                    "{} covariate columns; at most {}",
                    covariate_columns.len(),
                    covariates::MAX_PER_ROW
                ),
            ));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        // A column named twice is read from its first place.
        let mut index = HashMap::new();
        for (i, h) in header.iter().enumerate() {
            if required.contains(&h) || optional.contains(&h) {
                index.entry(h.to_owned()).or_insert(i);
            }
        }
        Ok(Self {
            index,
            covariates: covariate_columns,
        })
    }

    /// A record's value of `column` (`Missing` where the header lacks the optional column).
    pub fn field(&self, record: &csv::StringRecord, column: &str) -> RawField {
        RawField::from_csv(self.index.get(column).and_then(|&i| record.get(i)))
    }

    /// A record's covariates, and the problems of those that failed.
    pub fn covariates(&self, record: &csv::StringRecord, row: usize) -> (Covariates, Vec<Problem>) {
        let mut out = Covariates::new();
        let mut problems = Vec::new();
        for (i, name) in &self.covariates {
            let Some(text) = record.get(*i).map(str::trim).filter(|t| !t.is_empty()) else {
                continue;
            };
            match (
                covariates::check_name(Some(row), name),
                covariates::from_text(row, name, text),
            ) {
                (Ok(n), Ok(x)) => {
                    out.insert(n, x);
                }
                (n, x) => problems.extend(n.err().into_iter().chain(x.err())),
            }
        }
        (out, problems)
    }
}

/// A field as it arrived, before validation.
#[derive(Debug, Clone, PartialEq)]
pub enum RawField {
    Missing,
    Text(String),
    Number(f64),
    /// A JSON value of a kind the field can never be (object, array, bool, null).
    Other(&'static str),
}

impl RawField {
    pub fn from_json(v: Option<&Value>) -> Self {
        match v {
            None => Self::Missing,
            Some(Value::String(s)) => Self::Text(s.clone()),
            Some(Value::Number(n)) => n.as_f64().map_or(Self::Other("number"), Self::Number),
            Some(Value::Null) => Self::Other("null"),
            Some(Value::Bool(_)) => Self::Other("boolean"),
            Some(Value::Array(_)) => Self::Other("array"),
            Some(Value::Object(_)) => Self::Other("object"),
        }
    }

    pub fn from_csv(v: Option<&str>) -> Self {
        match v {
            None => Self::Missing,
            Some(s) if s.trim().is_empty() => Self::Missing,
            Some(s) => Self::Text(s.trim().to_owned()),
        }
    }
}

/// A problem per field of `object` that is not one of `known`.
pub fn unknown_fields<'a>(
    row: Option<usize>,
    object: &'a serde_json::Map<String, Value>,
    known: &'a [&str],
    what: &'a str,
) -> impl Iterator<Item = Problem> + 'a {
    object
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(move |k| {
            Problem::at(
                row,
                k,
                format!(
                    "is not a field of {what} (its fields: {})",
                    known.join(", ")
                ),
            )
        })
}

pub fn text_field(row: Option<usize>, name: &str, f: &RawField) -> Result<String, Problem> {
    match f {
        RawField::Text(s) => Ok(s.clone()),
        RawField::Missing => Err(Problem::at(row, name, "is missing")),
        RawField::Number(_) => Err(Problem::at(row, name, "must be a string, not a number")),
        RawField::Other(kind) => Err(Problem::at(
            row,
            name,
            format!("must be a string, not {kind}"),
        )),
    }
}

/// A name of row `row`'s `field`, read by `parse`.
pub fn name<T>(
    row: usize,
    field: &str,
    f: &RawField,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<T, Problem> {
    text_field(Some(row), field, f)
        .and_then(|s| parse(&s).map_err(|e| Problem::at(Some(row), field, e)))
}

/// As [`name`], `None` where the field is absent (or JSON null).
pub fn optional_name<T>(
    row: usize,
    field: &str,
    f: &RawField,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, Problem> {
    match f {
        RawField::Missing => Ok(None),
        f => name(row, field, f, parse).map(Some),
    }
}

/// A field's value, or `None` with its problem added to `problems`: a row's fields are read
/// one by one, and every problem of the row is reported.
pub fn ok<T>(problems: &mut Vec<Problem>, r: Result<T, Problem>) -> Option<T> {
    r.map_err(|p| problems.push(p)).ok()
}

/// A batch's size checked: at least one row, at most `max` (`limits.max_batch_anchors`);
/// `field` names its rows (`anchors`, `comparisons`).
pub fn batch_size(n: usize, max: usize, field: &str) -> Result<(), Vec<Problem>> {
    let problem = if n == 0 {
        format!("the batch has no {field}")
    } else if n > max {
        format!(
            "the batch has {n} {field}; the limit is {max} (limits.max_batch_anchors): split it"
        )
    } else {
        return Ok(());
    };
    Err(vec![Problem::at(None, field, problem)])
}

/// The records of a CSV body after its header, counted without keeping any (an upload over the
/// row limit is refused on this count). Bytes are not decoded (the rows' reader names bad
/// text), so reading stops only at the end.
pub fn count_csv_records(body: &[u8]) -> usize {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(body);
    let mut record = csv::ByteRecord::new();
    let mut n = 0;
    while let Ok(true) = reader.read_byte_record(&mut record) {
        n += 1;
    }
    n
}

/// Reads a CSV upload: checks its header ([`CsvHeader::read`]) and makes each record a row
/// with `row_of` (given the header, the record and its 1-based row). An unreadable header or
/// record is a problem; every one is reported together.
pub fn read_csv<T>(
    body: &[u8],
    required: &[&str],
    optional: &[&str],
    what: &str,
    mut row_of: impl FnMut(&CsvHeader, &csv::StringRecord, usize) -> T,
) -> Result<Vec<T>, Vec<Problem>> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(body);
    let header = reader
        .headers()
        .map_err(|e| {
            vec![Problem::at(
                None,
                "header",
                format!("unreadable CSV header: {e}"),
            )]
        })?
        .clone();
    let columns = CsvHeader::read(&header, required, optional, what)?;
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (i, record) in reader.records().enumerate() {
        match record {
            // No field of any row may hold a line break: one that does began with a quote
            // that was never closed, which swallowed the lines after it.
            Ok(r) if r.iter().any(|f| f.contains(['\n', '\r'])) => {
                problems.push(Problem::at(
                    Some(i + 1),
                    "record",
                    "a quoted field starts here and is never closed: it runs across the lines \
                     after it. Close the quote, or write a quote inside a field as \"\"",
                ));
                break;
            }
            Ok(r) => rows.push(row_of(&columns, &r, i + 1)),
            Err(e) => problems.push(Problem::at(
                Some(i + 1),
                "record",
                format!("unreadable CSV record: {e}"),
            )),
        }
    }
    if problems.is_empty() {
        Ok(rows)
    } else {
        Err(problems)
    }
}
