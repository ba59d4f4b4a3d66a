/**
 * A typed client for judgecal. `schema.ts` is generated from the service's `openapi.yaml`
 * (`npm run generate`; a test fails where it is stale), so every request and answer, warnings
 * included, is the service's own shape. The methods below are the calls an eval platform makes
 * most; `raw` is an openapi-fetch client typed over every endpoint.
 */
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export type Schemas = components["schemas"];
export type AnswerWarning = Schemas["AnswerWarning"];
export type WarningCode = Schemas["WarningCode"];

/** The JSON body of `method` on `path`. */
export type Body<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? B
  : never;

/** The JSON answer of `method` on `path` with status `S`. */
export type Answer<P extends keyof paths, M extends keyof paths[P], S extends number = 200> = paths[P][M] extends {
  responses: { [K in S]: { content: { "application/json": infer A } } };
}
  ? A
  : never;

/** A 4xx or 5xx: the service's `code`, message, per-row `details` and `request_id`. */
export class JudgecalError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Schemas["ProblemDto"][],
    readonly requestId?: string,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "JudgecalError";
  }
}

export interface Options {
  /** The service (default: JUDGECAL_URL, then http://127.0.0.1:8080). */
  baseUrl?: string;
  /** An API key (default: JUDGECAL_API_KEY). */
  apiKey?: string;
  fetch?: typeof globalThis.fetch;
}

type Reply<T> = { data?: T; error?: unknown; response: Response };

export class Judgecal {
  /** Every endpoint, typed: `jc.raw.GET("/v1/cells")`. */
  readonly raw;

  constructor(options: Options = {}) {
    const key = options.apiKey ?? process.env.JUDGECAL_API_KEY;
    this.raw = createClient<paths>({
      baseUrl: options.baseUrl ?? process.env.JUDGECAL_URL ?? "http://127.0.0.1:8080",
      headers: key ? { authorization: `Bearer ${key}` } : {},
      fetch: options.fetch,
    });
  }

  private static unwrap<T>({ data, error, response }: Reply<T>): T {
    if (error !== undefined || data === undefined) {
      const body = (error ?? {}) as { error?: { code?: string; message?: string; details?: Schemas["ProblemDto"][]; request_id?: string } };
      const e = body.error ?? {};
      throw new JudgecalError(response.status, e.code ?? "error", e.message ?? response.statusText, e.details ?? [], e.request_id);
    }
    return data;
  }

  /** POST /v1/anchors: one cell's anchors, stored whole or refused whole. */
  async uploadAnchors(body: Body<"/v1/anchors", "post">): Promise<Answer<"/v1/anchors", "post">> {
    return Judgecal.unwrap(await this.raw.POST("/v1/anchors", { body }));
  }

  /** POST /v1/judges/{judge}/calibrations, then the job until it ends (throws unless it succeeded). */
  async train(
    judge: string,
    body: Body<"/v1/judges/{judge}/calibrations", "post">,
    { timeoutMs = 300_000, pollMs = 100 } = {},
  ): Promise<Schemas["JobDto"]> {
    const queued = Judgecal.unwrap(
      await this.raw.POST("/v1/judges/{judge}/calibrations", { params: { path: { judge } }, body }),
    );
    const started = Date.now();
    for (;;) {
      const job = Judgecal.unwrap(await this.raw.GET("/v1/jobs/{id}", { params: { path: { id: queued.id } } }));
      if (job.state === "succeeded") return job;
      if (job.state === "failed" || job.state === "cancelled") {
        throw new JudgecalError(200, `job_${job.state}`, job.error ?? `job ${job.id} ${job.state}`, []);
      }
      if (Date.now() - started > timeoutMs) throw new Error(`job ${job.id} still ${job.state}`);
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  /** POST /v1/correct: corrected scores with their intervals, and the answer's warnings. */
  async correct(body: Body<"/v1/correct", "post">): Promise<Answer<"/v1/correct", "post">> {
    return Judgecal.unwrap(await this.raw.POST("/v1/correct", { body }));
  }

  /** POST /v1/estimate: a run's de-biased mean and its interval. */
  async estimate(body: Body<"/v1/estimate", "post">): Promise<Answer<"/v1/estimate", "post">> {
    return Judgecal.unwrap(await this.raw.POST("/v1/estimate", { body }));
  }

  /** POST /v1/compare: mean(A) − mean(B), de-biased, with its interval and p-value. */
  async compare(body: Body<"/v1/compare", "post">): Promise<Answer<"/v1/compare", "post">> {
    return Judgecal.unwrap(await this.raw.POST("/v1/compare", { body }));
  }
}
