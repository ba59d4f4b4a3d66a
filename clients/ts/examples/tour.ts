import { Judgecal } from "@judgecal/client";

// The service and key: JUDGECAL_URL and JUDGECAL_API_KEY, or new Judgecal({ baseUrl, apiKey }).
const jc = new Judgecal();

// A judge score corrected, with its 95% predictive interval.
const answer = await jc.correct({ judge: "ChatGPT", rubric: "coherence", scores: [2] });
const [r] = answer.results;
console.log(`2 -> ${r.corrected.toFixed(2)} [${r.predictive![0].toFixed(2)}, ${r.predictive![1].toFixed(2)}]`);

// A run's de-biased mean, and the codes of any assumption it departs from.
const run = await jc.estimate({ judge: "ChatGPT", rubric: "coherence", scores: [4, 4, 3, 5, 4, 2, 4, 3] });
const warnings = run.warnings.map((w) => w.code).join(", ") || "none";
console.log(`run mean ${run.estimate.toFixed(2)} [${run.interval[0].toFixed(2)}, ${run.interval[1].toFixed(2)}], warnings: ${warnings}`);
