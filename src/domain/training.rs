//! A training request, parsed once into types: which judge, which rubrics, which method with
//! which options (or `auto` with its rule and every candidate's options). Unknown option keys
//! are refused, so a misspelt option never silently does nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::bounds;
use super::calibration::JobKind;
use super::{CovariateName, JudgeName, JudgeVersion, Problem, RubricName};
use judgecal_stats::cv::{Scheme, Split};
use judgecal_stats::method::{SchemaSet, schema_set};
use judgecal_stats::select::{AutoOptions, Objective, Rule};
use judgecal_stats::{Candidates, Method, MethodOptions};

/// What a job of one method takes besides the method's own options: how its versions are
/// evaluated on held-out anchors, its seed, and whether to activate them whatever their
/// checks say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct JobOptions {
    /// Activate the new versions even when they fail their checks (a Bayesian fit's
    /// diagnostics).
    pub force: bool,
    /// k of k-fold cross-validation (default: 5; the flow's default is `holdout` 0.2).
    #[schema(minimum = 2, maximum = 20)]
    pub folds: Option<usize>,
    /// Evaluate on this held-out fraction instead of k folds.
    #[schema(exclusive_minimum = 0, exclusive_maximum = 1)]
    pub holdout: Option<f64>,
    /// Seeds the split and the fit: same anchors + same seed = same versions.
    pub seed: u64,
}

impl JobOptions {
    fn split(&self, method: Method) -> Split {
        let scheme = match (self.holdout, self.folds) {
            (Some(f), _) => Scheme::Holdout(f),
            (None, Some(k)) => Scheme::Folds(k),
            (None, None) => method.default_scheme(),
        };
        Split {
            scheme,
            seed: self.seed,
        }
    }
}

/// The settings of `"method": "auto"` besides each candidate's options (given under the
/// candidate's name, e.g. `"bayes": {"draws": 2000}`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AutoSettings {
    /// k of the k folds every candidate is evaluated on.
    #[schema(minimum = 2, maximum = 20)]
    pub folds: usize,
    /// Evaluate every candidate on this held-out fraction instead (one flow training instead
    /// of k).
    #[schema(exclusive_minimum = 0, exclusive_maximum = 1)]
    pub holdout: Option<f64>,
    /// Seeds the split and every fit.
    pub seed: u64,
    /// The held-out figure that picks the winner per cell (lower is better; `mean_error` is
    /// taken absolute). A candidate worse than the raw judge on it never wins.
    pub objective: Objective,
    /// Breaks ties on the objective.
    pub tie_break: Objective,
    /// Candidates within this fraction of the best objective are tied.
    #[schema(minimum = 0, maximum = 0.5)]
    pub tie_tolerance: f64,
    /// A cell needs this many anchors for the flow to be a candidate.
    #[schema(minimum = 2)]
    pub flow_min_anchors: usize,
}

impl Default for AutoSettings {
    fn default() -> Self {
        let rule = Rule::default();
        Self {
            folds: 5,
            holdout: None,
            seed: 0,
            objective: rule.objective,
            tie_break: rule.tie_break,
            tie_tolerance: rule.tie_tolerance,
            flow_min_anchors: Method::Flow.auto_min_anchors(),
        }
    }
}

/// A job of one method.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodJob {
    pub options: MethodOptions,
    pub split: Split,
    pub force: bool,
}

/// What a job does.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Method(MethodJob),
    Auto(AutoOptions),
}

impl Plan {
    /// The seed of the job's folds and draws.
    pub fn seed(&self) -> u64 {
        match self {
            Plan::Method(job) => job.split.seed,
            Plan::Auto(options) => options.split.seed,
        }
    }
}

/// A checked training request.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingRequest {
    pub judge: JudgeName,
    /// The rubrics to train; every cell of the judge with enough anchors when `None`.
    pub rubrics: Option<Vec<RubricName>>,
    /// Whose anchors to fit: one judge version's only, never several together.
    pub judge_version: VersionChoice,
    /// A panel's: the judge version of each member whose anchors it fits (`None`: the
    /// member's unversioned anchors). Named by the request or resolved when the job is queued;
    /// empty for a judge.
    pub member_versions: Vec<(JudgeName, Option<JudgeVersion>)>,
    /// Covariates the anchors carry to fit beside the judge score.
    pub covariates: CovariateChoice,
    pub plan: Plan,
}

/// Which covariates a judge's training considers beside the judge score. Each one considered
/// is kept, per rubric, only where it lowers held-out error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CovariateChoice {
    /// The request named none: those every anchor of the fitted cells carries. Where none is
    /// kept in any rubric the version reads the judge score alone, as if none were carried.
    Carried,
    /// Those the request named (every anchor must carry each); empty: the judge score alone.
    Named(Vec<CovariateName>),
}

impl CovariateChoice {
    /// The covariates the request named (none for `Carried`).
    pub fn named(&self) -> &[CovariateName] {
        match self {
            CovariateChoice::Carried => &[],
            CovariateChoice::Named(n) => n,
        }
    }
}

/// The judge version a training job fits.
#[derive(Debug, Clone, PartialEq)]
pub enum VersionChoice {
    /// The judge's newest version with anchors (the one whose first anchor arrived last),
    /// resolved when the job is queued.
    Newest,
    /// This one (`None`: the anchors uploaded without a version).
    Exactly(Option<JudgeVersion>),
}

impl VersionChoice {
    /// The resolved version; `None` also for `Newest`, which a queued job never holds.
    pub fn exactly(&self) -> Option<&JudgeVersion> {
        match self {
            VersionChoice::Exactly(v) => v.as_ref(),
            VersionChoice::Newest => None,
        }
    }
}

fn settings<T: serde::de::DeserializeOwned + Serialize>(
    map: Map<String, Value>,
    schema: SchemaSet,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    match serde_json::from_value::<T>(Value::Object(map)) {
        Ok(t) => {
            let json = serde_json::to_value(&t).unwrap_or_default();
            problems.extend(bounds::check(&json, &schema, "options"));
            Some(t)
        }
        Err(e) => {
            problems.push(Problem::at(None, "options", e.to_string()));
            None
        }
    }
}

/// A method's options: parsed, then checked against its schema's bounds and its own rules.
fn method_options(
    method: Method,
    value: Value,
    field: &str,
    problems: &mut Vec<Problem>,
) -> Option<MethodOptions> {
    match method.options(value) {
        Ok(o) => {
            let before = problems.len();
            let mut found = bounds::check(&o.to_json(), &method.options_schema(), field);
            problems.append(&mut found);
            if let Err(e) = o.check() {
                problems.push(Problem::at(None, field, e));
            }
            (problems.len() == before).then_some(o)
        }
        Err(e) => {
            problems.push(Problem::at(None, field, e));
            None
        }
    }
}

/// The keys `names` of `options`, taken out of it.
fn take(options: &mut Map<String, Value>, names: &[&str]) -> Map<String, Value> {
    names
        .iter()
        .filter_map(|k| options.remove(*k).map(|v| ((*k).to_owned(), v)))
        .collect()
}

const JOB_KEYS: &[&str] = &["force", "folds", "holdout", "seed"];
const AUTO_KEYS: &[&str] = &[
    "folds",
    "holdout",
    "seed",
    "objective",
    "tie_break",
    "tie_tolerance",
    "flow_min_anchors",
];

/// One method's job: the job's own settings, then the method's options.
fn method_plan(
    m: Method,
    mut map: Map<String, Value>,
    problems: &mut Vec<Problem>,
) -> Option<Plan> {
    let common: Option<JobOptions> = settings(
        take(&mut map, JOB_KEYS),
        schema_set::<JobOptions>(),
        problems,
    );
    let options = method_options(m, Value::Object(map), "options", problems);
    common.zip(options).map(|(c, options)| {
        Plan::Method(MethodJob {
            options,
            split: c.split(m),
            force: c.force,
        })
    })
}

/// `auto`'s job: its own settings, then each candidate's options under its name.
fn auto_plan(mut map: Map<String, Value>, problems: &mut Vec<Problem>) -> Option<Plan> {
    let auto: Option<AutoSettings> = settings(
        take(&mut map, AUTO_KEYS),
        schema_set::<AutoSettings>(),
        problems,
    );
    let mut candidates = Candidates::default();
    for (key, value) in map {
        match Method::parse(&key) {
            Ok(m) => {
                let field = format!("options.{key}");
                if let Some(o) = method_options(m, value, &field, problems) {
                    candidates.set(o);
                }
            }
            Err(_) => problems.push(Problem::at(
                None,
                "options",
                format!(
                    "unknown field `{key}`; auto takes {} and each candidate's options under its name ({})",
                    AUTO_KEYS.join(", "),
                    Method::ALL.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
    auto.map(|a| {
        Plan::Auto(AutoOptions {
            split: Split {
                scheme: match a.holdout {
                    Some(f) => Scheme::Holdout(f),
                    None => Scheme::Folds(a.folds),
                },
                seed: a.seed,
            },
            rule: Rule {
                objective: a.objective,
                tie_break: a.tie_break,
                tie_tolerance: a.tie_tolerance,
            },
            flow_min_anchors: a.flow_min_anchors,
            candidates,
        })
    })
}

impl TrainingRequest {
    /// Parses a request for `judge` as it arrives: `method` by name, `rubrics` by name, and
    /// `options` for that method. Every problem is named.
    pub fn parse(
        judge: &str,
        method: &str,
        rubrics: Option<&[String]>,
        judge_version: Option<&str>,
        options: Value,
    ) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let judge_version = match judge_version.map(JudgeVersion::parse) {
            None => VersionChoice::Newest,
            Some(Ok(v)) => VersionChoice::Exactly(Some(v)),
            Some(Err(e)) => {
                problems.push(Problem::at(None, "judge_version", e));
                VersionChoice::Newest
            }
        };
        let judge =
            JudgeName::parse(judge).map_err(|e| problems.push(Problem::at(None, "judge", e)));
        let kind =
            JobKind::parse(method).map_err(|e| problems.push(Problem::at(None, "method", e)));
        let rubrics: Option<Vec<RubricName>> = rubrics.map(|names| {
            names
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    RubricName::parse(r)
                        .map_err(|e| problems.push(Problem::at(None, &format!("rubrics[{i}]"), e)))
                        .ok()
                })
                .collect()
        });
        if rubrics.as_ref().is_some_and(Vec::is_empty) {
            problems.push(Problem::at(
                None,
                "rubrics",
                "name at least one rubric, or leave `rubrics` out to train them all",
            ));
        }
        let map = match options {
            Value::Object(m) => m,
            other => {
                problems.push(Problem::at(
                    None,
                    "options",
                    format!("must be an object; got {other}"),
                ));
                Map::new()
            }
        };
        let plan = match kind {
            Ok(JobKind::Method(m)) => method_plan(m, map, &mut problems),
            Ok(JobKind::Auto) => auto_plan(map, &mut problems),
            Err(()) => None,
        };
        match (judge, plan, problems.is_empty()) {
            (Ok(judge), Some(plan), true) => Ok(Self {
                judge,
                rubrics,
                judge_version,
                member_versions: Vec::new(),
                covariates: CovariateChoice::Carried,
                plan,
            }),
            _ => Err(problems),
        }
    }

    pub fn kind(&self) -> JobKind {
        match &self.plan {
            Plan::Method(j) => JobKind::Method(j.options.method()),
            Plan::Auto(_) => JobKind::Auto,
        }
    }

    /// Activate the versions whatever their checks say.
    pub fn force(&self) -> bool {
        match &self.plan {
            Plan::Method(j) => j.force,
            Plan::Auto(_) => false,
        }
    }

    /// The options with every default filled in, as the job records them.
    pub fn options_json(&self) -> Value {
        let scheme = |s: Scheme| match s {
            Scheme::Folds(k) => (Some(k), None),
            Scheme::Holdout(f) => (None, Some(f)),
        };
        match &self.plan {
            Plan::Method(j) => {
                let (folds, holdout) = scheme(j.split.scheme);
                let common = JobOptions {
                    force: j.force,
                    folds,
                    holdout,
                    seed: j.split.seed,
                };
                merge(&[
                    serde_json::to_value(common).unwrap_or_default(),
                    j.options.to_json(),
                ])
            }
            Plan::Auto(a) => {
                let (folds, holdout) = scheme(a.split.scheme);
                let settings = AutoSettings {
                    folds: folds.unwrap_or(AutoSettings::default().folds),
                    holdout,
                    seed: a.split.seed,
                    objective: a.rule.objective,
                    tie_break: a.rule.tie_break,
                    tie_tolerance: a.rule.tie_tolerance,
                    flow_min_anchors: a.flow_min_anchors,
                };
                merge(&[
                    serde_json::to_value(settings).unwrap_or_default(),
                    a.candidates.to_json(),
                ])
            }
        }
    }

    /// The request as a job stores and shows it.
    pub fn to_json(&self) -> Value {
        let mut json = serde_json::json!({
            "judge": self.judge,
            "method": self.kind().as_str(),
            "rubrics": self.rubrics,
            "options": self.options_json(),
        });
        // Resolved (as the service queues every job): the version, null for the unversioned
        // anchors. `Newest` is left out.
        if let (VersionChoice::Exactly(v), Some(map)) = (&self.judge_version, json.as_object_mut())
        {
            map.insert("judge_version".into(), serde_json::json!(v));
        }
        if let (false, Some(map)) = (self.member_versions.is_empty(), json.as_object_mut()) {
            let members: Map<String, Value> = self
                .member_versions
                .iter()
                .map(|(j, v)| (j.to_string(), serde_json::json!(v)))
                .collect();
            map.insert("member_versions".into(), Value::Object(members));
        }
        // Named (an empty list included); `Carried` is left out, as the request left it.
        if let (CovariateChoice::Named(names), Some(map)) = (&self.covariates, json.as_object_mut())
        {
            map.insert("covariates".into(), serde_json::json!(names));
        }
        json
    }

    /// A stored job's request.
    pub fn from_json(stored: &Value) -> Result<Self, Vec<Problem>> {
        let text = |k: &str| stored.get(k).and_then(Value::as_str).unwrap_or_default();
        let rubrics: Option<Vec<String>> = stored
            .get("rubrics")
            .and_then(|r| serde_json::from_value(r.clone()).ok());
        // A resolved version is a string, or null for the unversioned anchors; absent, it is
        // `Newest` (which for a job queued before judge versions finds only those).
        let judge_version = stored.get("judge_version");
        Self::parse(
            text("judge"),
            text("method"),
            rubrics.as_deref(),
            judge_version.and_then(Value::as_str),
            stored
                .get("options")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
        )
        .and_then(|r| {
            let members = stored
                .get("member_versions")
                .and_then(|m| serde_json::from_value(m.clone()).ok())
                .unwrap_or_default();
            let covariates: Option<Vec<String>> = stored
                .get("covariates")
                .and_then(|c| serde_json::from_value(c.clone()).ok());
            Ok(Self {
                member_versions: parse_member_versions(members)?,
                covariates: parse_covariate_choice(covariates.as_deref())?,
                judge_version: match judge_version {
                    Some(Value::Null) => VersionChoice::Exactly(None),
                    _ => r.judge_version,
                },
                ..r
            })
        })
    }
}

/// A training's `covariates`: absent, those the anchors carry; else the names, checked as
/// [`parse_covariate_names`] does.
pub fn parse_covariate_choice(names: Option<&[String]>) -> Result<CovariateChoice, Vec<Problem>> {
    names.map_or(Ok(CovariateChoice::Carried), |n| {
        parse_covariate_names(n).map(CovariateChoice::Named)
    })
}

/// A training's `covariates`: names, each once, at most `covariates::MAX_FITTED`; problems at
/// `covariates[i]`.
pub fn parse_covariate_names(names: &[String]) -> Result<Vec<CovariateName>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out: Vec<CovariateName> = Vec::with_capacity(names.len());
    if names.len() > super::covariates::MAX_FITTED {
        problems.push(Problem::at(
            None,
            "covariates",
            format!(
                "{} covariates; a training considers at most {} (each raw, logged or left out: 3^{} candidates)",
                names.len(),
                super::covariates::MAX_FITTED,
                super::covariates::MAX_FITTED
            ),
        ));
    }
    for (i, raw) in names.iter().enumerate() {
        let field = format!("covariates[{i}]");
        match CovariateName::parse(raw) {
            Err(e) => problems.push(Problem::at(None, &field, e)),
            Ok(c) if out.contains(&c) => {
                problems.push(Problem::at(None, &field, format!("{c} is named twice")))
            }
            Ok(c) => out.push(c),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// A panel training's `member_versions` (`{member: judge version or null}`), checked: names
/// and versions valid, each problem at `member_versions.{member}`. Whether each is a member
/// is the service's to check.
pub fn parse_member_versions(
    raw: std::collections::BTreeMap<String, Option<String>>,
) -> Result<Vec<(JudgeName, Option<JudgeVersion>)>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = Vec::with_capacity(raw.len());
    for (name, version) in raw {
        let field = format!("member_versions.{name}");
        let judge =
            JudgeName::parse(&name).map_err(|e| problems.push(Problem::at(None, &field, e)));
        let version = version
            .as_deref()
            .map(JudgeVersion::parse)
            .transpose()
            .map_err(|e| problems.push(Problem::at(None, &field, e)));
        if let (Ok(j), Ok(v)) = (judge, version) {
            out.push((j, v));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// One object with the keys of all of `parts` (objects).
fn merge(parts: &[Value]) -> Value {
    let mut out = Map::new();
    for p in parts {
        if let Value::Object(m) = p {
            out.extend(m.clone());
        }
    }
    Value::Object(out)
}

/// The schemas of a job's options, for the API document: one method's job options, and
/// auto's.
pub fn options_schemas() -> Vec<SchemaSet> {
    let mut out = vec![schema_set::<JobOptions>(), schema_set::<AutoSettings>()];
    out.extend(Method::ALL.iter().map(|m| m.options_schema()));
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(method: &str, options: Value) -> Result<TrainingRequest, Vec<Problem>> {
        TrainingRequest::parse("j1", method, None, None, options)
    }

    #[test]
    fn options_refuse_unknown_keys_and_bad_values() {
        let e = parse("bayes", json!({"draw": 10})).unwrap_err();
        assert_eq!(e[0].field, "options");
        assert!(e[0].problem.contains("unknown field `draw`"), "{e:?}");
        let e = parse("bayes", json!({"draws": 5})).unwrap_err();
        assert_eq!(e[0].field, "options.draws");
        let e = parse("bayes", json!({"holdout": 1.5})).unwrap_err();
        assert_eq!(e[0].field, "options.holdout");
        let e = parse("bayes", json!({"folds": 1})).unwrap_err();
        assert_eq!(e[0].field, "options.folds");
        // Options of the other method are refused too.
        assert!(parse("bayes", json!({"epochs": 10})).is_err());
        assert!(parse("flow", json!({"epochs": 10})).is_ok());
        let e = parse("flow", json!({"step": 0.3})).unwrap_err();
        assert!(e[0].problem.contains("step"), "{e:?}");
        assert!(parse("bayes", json!({})).is_ok());
        let e = parse("magic", json!({})).unwrap_err();
        assert_eq!(e[0].field, "method");
        // `options` is an object (left out, it is `{}`).
        assert_eq!(parse("bayes", Value::Null).unwrap_err()[0].field, "options");
    }

    #[test]
    fn a_resolved_judge_version_reads_back_the_same() {
        let named = TrainingRequest::parse("j1", "isotonic", None, Some("v2"), json!({})).unwrap();
        assert_eq!(
            named.judge_version,
            VersionChoice::Exactly(Some(JudgeVersion::parse("v2").unwrap()))
        );
        let unversioned = TrainingRequest {
            judge_version: VersionChoice::Exactly(None),
            ..named.clone()
        };
        let raw = [("a", Some("v2")), ("b", None)]
            .map(|(j, v)| (j.to_owned(), v.map(str::to_owned)))
            .into();
        let panel = TrainingRequest {
            member_versions: parse_member_versions(raw).unwrap(),
            ..unversioned.clone()
        };
        assert_eq!(
            panel.member_versions[1],
            (JudgeName::parse("b").unwrap(), None)
        );
        for r in [named, unversioned, panel] {
            assert_eq!(TrainingRequest::from_json(&r.to_json()).unwrap(), r);
        }
        let bad = TrainingRequest::parse("j1", "isotonic", None, Some(""), json!({})).unwrap_err();
        assert_eq!(bad[0].field, "judge_version");
        let raw = [("a", Some(""))]
            .map(|(j, v)| (j.to_owned(), v.map(str::to_owned)))
            .into();
        let bad = parse_member_versions(raw).unwrap_err();
        assert_eq!(bad[0].field, "member_versions.a");
    }

    #[test]
    fn every_default_is_recorded_and_reads_back_the_same() {
        for (method, options) in [
            ("bayes", json!({"draws": 2000, "seed": 4})),
            ("flow", json!({"epochs": 10, "folds": 3})),
            ("quantile_map", json!({"holdout": 0.3})),
            ("identity", json!({})),
            (
                "auto",
                json!({"objective": "w1", "bayes": {"warmup": 100}, "flow": {"epochs": 5}}),
            ),
        ] {
            let r = parse(method, options).unwrap();
            let stored = r.to_json();
            assert_eq!(stored["method"], method);
            assert_eq!(TrainingRequest::from_json(&stored).unwrap(), r, "{stored}");
        }
        let flow = parse("flow", json!({})).unwrap();
        assert_eq!(flow.options_json()["holdout"], 0.2);
        let Plan::Auto(a) = parse("auto", json!({"bayes": {"draws": 50}})).unwrap().plan else {
            panic!("auto");
        };
        assert_eq!(a.candidates.bayes.draws, 50);
        let e = parse("auto", json!({"objective": "rmse"})).unwrap_err();
        assert!(e[0].problem.contains("rmse"), "{e:?}");
        let e = parse("auto", json!({"bayes": {"draws": 5}, "nope": 1})).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["options.bayes.draws", "options"], "{e:?}");
    }
}
