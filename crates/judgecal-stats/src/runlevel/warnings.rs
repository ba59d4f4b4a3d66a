//! What a reader of a run-level answer must know beside its interval: decided here, where the
//! statistics are, and rendered here into the one vocabulary's warnings (`crate::warning`) that
//! `http` passes on.

use super::groups::GroupTerm;
use super::{AnswerPath, GroupAnswer, RunEstimate, THIN_ANCHORS, Term, Transport};
use crate::warning::{Code, Warning};

/// One thing to know about an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum RunWarning {
    /// More than 5% of the run's judge scores lie outside the anchors' judge-score range: the
    /// corrected level there is extrapolated.
    Extrapolated { outside: f64, range: (f64, f64) },
    /// More than 5% of the run's judge scores lie where the anchors are thin.
    Sparse { thin: f64 },
    /// The corrector's own uncertainty was left out, for this reason.
    CorrectorOmitted(&'static str),
    /// The transport check found the corrector biased on this run: its mean residual on the
    /// labelled items, and the interval (at `level`) for the bias on runs like it.
    Biased {
        mean_residual: f64,
        level: f64,
        interval: (f64, f64),
    },
    /// The version's anchors name fewer than two groups: system-specific bias is not
    /// accounted for.
    GroupsUnmeasured,
    /// Too few groups to estimate how the bias varies between systems: the conservative rule
    /// applied (`new`: to a new group, whose bias it takes as a normal draw like theirs).
    GroupsConservative { groups: usize, new: bool },
    /// A new group's bias is taken as a normal draw like the known groups', but these lie
    /// further from the others than normal biases allow: a new system could too.
    GroupsOutlying {
        outlying: Vec<String>,
        groups: usize,
    },
    /// A label plan that reaches only `reached` of the `open` pairs' targets.
    PlanShort { reached: usize, open: usize },
}

/// A warning, and which of the request's runs it is about (`None`: the answer as a whole).
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub run: Option<usize>,
    pub warning: RunWarning,
}

/// What one run's answer needs said.
pub fn of_run(e: &RunEstimate, level: f64) -> Vec<RunWarning> {
    let mut out = Vec::new();
    if e.support.extrapolated() {
        out.push(RunWarning::Extrapolated {
            outside: e.support.outside,
            range: e.support.anchor_range,
        });
    }
    if e.support.sparse() && !e.support.extrapolated() {
        out.push(RunWarning::Sparse {
            thin: e.support.thin,
        });
    }
    if let Term::Omitted(why) = e.term {
        out.push(RunWarning::CorrectorOmitted(why));
    }
    if let Some(t) = e.transport.filter(Transport::biased) {
        out.push(RunWarning::Biased {
            mean_residual: t.mean_residual,
            level,
            interval: t.bias_interval,
        });
    }
    out
}

/// What the group term of a plain answer needs said.
pub fn of_group(g: &GroupAnswer) -> Option<RunWarning> {
    match (g.term, g.rule.as_deref()) {
        (GroupTerm::Unmeasured, _) => Some(RunWarning::GroupsUnmeasured),
        (term, Some("conservative")) => Some(RunWarning::GroupsConservative {
            groups: g.groups,
            new: term == GroupTerm::New,
        }),
        (GroupTerm::New, _) if !g.outlying.is_empty() => Some(RunWarning::GroupsOutlying {
            outlying: g.outlying.clone(),
            groups: g.groups,
        }),
        _ => None,
    }
}

/// The notes of an answer over `runs` (in the request's order): each run's, then the group
/// term's, said once, where any run took the plain path (`group` is the answer's group term,
/// or the first plain run's).
pub fn of_runs(runs: &[&RunEstimate], group: Option<&GroupAnswer>, level: f64) -> Vec<Note> {
    let mut notes: Vec<Note> = runs
        .iter()
        .enumerate()
        .flat_map(|(k, e)| {
            of_run(e, level).into_iter().map(move |warning| Note {
                run: Some(k),
                warning,
            })
        })
        .collect();
    let plain = runs.iter().find(|e| e.path == AnswerPath::Plain);
    if let Some(g) = plain.map(|e| group.unwrap_or(&e.group)).and_then(of_group) {
        notes.push(Note {
            run: None,
            warning: g,
        });
    }
    notes
}

/// A note of the answer as its reader sees it: `subject` names the run it is about (`""` for
/// a single run's answer, `"run a: "`, `"model-x: "`).
pub fn render(note: &Note, subject: impl Fn(usize) -> String) -> Warning {
    let name = note.run.map(&subject).unwrap_or_default();
    let message = match &note.warning {
        RunWarning::Extrapolated { outside, range } => format!(
            "{name}{:.1}% of the judge scores lie outside the anchors' range [{}, {}]: the corrected level there is extrapolated; upload anchors covering those scores, or label a sample of the run",
            100.0 * outside,
            range.0,
            range.1
        ),
        RunWarning::Sparse { thin } => format!(
            "{name}{:.1}% of the judge scores lie where the anchors are thin (fewer than {THIN_ANCHORS} anchors nearby, or a quarter of their average there): the corrected level there rests on few anchors; upload anchors near those scores, or label a sample of the run",
            100.0 * thin
        ),
        RunWarning::CorrectorOmitted(why) => format!("{name}{why}"),
        RunWarning::Biased {
            mean_residual,
            level,
            interval,
        } => format!(
            "{name}the corrector is biased on runs like this one: its mean residual on the labelled items is {:.3} ({:.0}% interval for the bias [{:.3}, {:.3}]); the labelled path corrects for it, a plain estimate would not",
            mean_residual,
            100.0 * level,
            interval.0,
            interval.1
        ),
        RunWarning::GroupsUnmeasured => "the version's anchors name fewer than two groups: system-specific bias (a judge rating one system's outputs differently from another's at the same score) is not accounted for; upload anchors with `group` set to the system whose output was judged, from several systems, and retrain".to_owned(),
        RunWarning::GroupsConservative { groups, new } => format!(
            "the version's anchors name {groups} groups: too few to estimate how the judge's bias varies between systems, so the conservative rule applies (the group's own bias unshrunk, or the whole between-group spread for a new system){}",
            if *new {
                format!("; a new system's interval takes its bias as a normal draw like the {groups} known systems', and cannot see one far from them all (where one system in five is far, it covers 81-93%): label a sample of the run")
            } else {
                String::new()
            }
        ),
        RunWarning::GroupsOutlying { outlying, groups } => format!(
            "a new system's bias is taken as a normal draw like the {groups} known systems', but {} lie{} further from the others than normal biases allow: a new system could sit as far, and its interval would not cover it; label a sample of the run (the labelled path needs no such assumption)",
            outlying.join(", "),
            if outlying.len() == 1 { "s" } else { "" }
        ),
        RunWarning::PlanShort { reached, open } => format!(
            "{name}the label plan reaches {reached} of the {open} open pairs' targets: the others need more labels than the budget or the runs' items allow"
        ),
    };
    let code = match &note.warning {
        RunWarning::Extrapolated { .. } => Code::Extrapolated,
        RunWarning::Sparse { .. } => Code::SparseAnchors,
        RunWarning::CorrectorOmitted(_) => Code::CorrectorOmitted,
        RunWarning::Biased { .. } => Code::CorrectorBiased,
        RunWarning::GroupsUnmeasured => Code::GroupsUnmeasured,
        RunWarning::GroupsConservative { .. } => Code::GroupsConservative,
        RunWarning::GroupsOutlying { .. } => Code::GroupsOutlying,
        RunWarning::PlanShort { .. } => Code::LabelPlanShort,
    };
    let w = Warning::new(code, message);
    match &note.warning {
        RunWarning::GroupsOutlying { outlying, .. } => w.systems(outlying),
        _ => w,
    }
}

/// The notes of an answer, rendered.
pub fn rendered(notes: &[Note], subject: impl Fn(usize) -> String) -> Vec<Warning> {
    notes.iter().map(|n| render(n, &subject)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(term: GroupTerm, rule: &str, outlying: &[&str]) -> GroupAnswer {
        GroupAnswer {
            term,
            shift: 0.0,
            variance: 0.01,
            tau: Some(0.3),
            groups: 12,
            rule: Some(rule.into()),
            outlying: outlying.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn a_new_systems_answer_says_when_a_known_one_lies_far_from_the_rest() {
        let far = RunWarning::GroupsOutlying {
            outlying: vec!["sys-3".into()],
            groups: 12,
        };
        assert_eq!(
            of_group(&answer(GroupTerm::New, "random_effects", &["sys-3"])),
            Some(far)
        );
        // A known system's own bias needs no normal spread; nor do biases none of which is far.
        assert_eq!(
            of_group(&answer(GroupTerm::Known, "random_effects", &["sys-3"])),
            None
        );
        assert_eq!(
            of_group(&answer(GroupTerm::New, "random_effects", &[])),
            None
        );
        // Under the conservative rule a new system's answer says what it cannot see.
        assert_eq!(
            of_group(&answer(GroupTerm::New, "conservative", &[])),
            Some(RunWarning::GroupsConservative {
                groups: 12,
                new: true
            })
        );
    }
}
