//! Where the experiment's reference scores come from when not from the built-in stand-in: a
//! numeric column of a CSV file, or a given split.

use std::path::Path;

use super::design::Split;

fn read_csv(path: &Path) -> Result<csv::Reader<std::fs::File>, String> {
    csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn column_index(
    reader: &mut csv::Reader<std::fs::File>,
    path: &Path,
    name: &str,
) -> Result<usize, String> {
    let headers = reader
        .headers()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    headers.iter().position(|h| h == name).ok_or_else(|| {
        format!(
            "{} has no column {name:?}; its columns: {}",
            path.display(),
            headers.iter().collect::<Vec<_>>().join(", ")
        )
    })
}

fn number(raw: &str, path: &Path, row: usize, column: &str) -> Result<f64, String> {
    raw.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| {
            format!(
                "{} row {row}, column {column}: {raw:?} is not a finite number",
                path.display()
            )
        })
}

/// The reference scores of a CSV column, in file order.
pub fn read_column(path: &Path, column: &str, scale: (f64, f64)) -> Result<Vec<f64>, String> {
    let mut reader = read_csv(path)?;
    let idx = column_index(&mut reader, path, column)?;
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let row = i + 2;
        let record = record.map_err(|e| format!("{} row {row}: {e}", path.display()))?;
        let y = number(record.get(idx).unwrap_or(""), path, row, column)?;
        if !(scale.0..=scale.1).contains(&y) {
            return Err(format!(
                "{} row {row}, column {column}: {y} lies outside the scale [{}, {}] (--scale)",
                path.display(),
                scale.0,
                scale.1
            ));
        }
        out.push(y);
    }
    Ok(out)
}

/// A given split: `split` is train or test, `order` ranks the train rows (budget n takes the
/// n lowest).
pub fn read_pairs(path: &Path) -> Result<Split, String> {
    let mut reader = read_csv(path)?;
    let idx: Vec<usize> = ["split", "order", "judge", "reference"]
        .iter()
        .map(|c| column_index(&mut reader, path, c))
        .collect::<Result<_, _>>()?;
    let mut test = Vec::new();
    let mut train: Vec<(f64, (f64, f64))> = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let row = i + 2;
        let record = record.map_err(|e| format!("{} row {row}: {e}", path.display()))?;
        let field = |k: usize| record.get(idx[k]).unwrap_or("");
        let j = number(field(2), path, row, "judge")?;
        let y = number(field(3), path, row, "reference")?;
        match field(0) {
            "test" => test.push((j, y)),
            "train" => train.push((number(field(1), path, row, "order")?, (j, y))),
            other => {
                return Err(format!(
                    "{} row {row}, column split: {other:?} must be train or test",
                    path.display()
                ));
            }
        }
    }
    train.sort_by(|a, b| a.0.total_cmp(&b.0));
    if test.len() < 2 || train.len() < 2 {
        return Err(format!(
            "{}: needs at least 2 test and 2 train rows",
            path.display()
        ));
    }
    Ok(Split {
        test,
        pool: train.into_iter().map(|t| t.1).collect(),
    })
}
