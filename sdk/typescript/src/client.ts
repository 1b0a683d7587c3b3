// The client: one method per operation of openapi.json, grouped by what
// it acts on (projects, runs, jobs, queue, …), over the generated
// openapi-fetch client. Every method answers the envelope's data or
// throws the PaddockError of its code.

import createClient, { type Client as FetchClient } from "openapi-fetch";
import type { paths, operations } from "./schema.js";
import { TransportError, paddockError } from "./errors.js";
import { transportFetch, fromEnv, type FetchInit, type Transport } from "./transport.js";
import type { BodyOf, DataOf, Notice, QueryOf } from "./types.js";
import { followEvents, followNotices, type FollowOptions } from "./events.js";
import { execAttach, execStream, type AttachOptions, type ExecProcess, type StreamOptions } from "./exec.js";
import { RunSession } from "./session.js";

/** How a Paddock client talks. */
export interface PaddockOptions {
  /** Where the daemon is (default: fromEnv(), as the paddock CLI finds it). */
  transport?: Transport;
  /** A bearer token to send instead of the transport's: a run's token (RunSession.agent) or a principal's. */
  token?: string;
  /** Calls made for a run's agent by an operator (the Paddock-Agent header): a run a restart checkpointed is resumed by them. */
  agent?: boolean;
  /** Told of every request before it is sent: its method and URL path (an observer, as the Go client's WithObserver). */
  onRequest?: (method: string, path: string) => void;
  /**
   * How many times a call is made again when its error says nothing of it
   * was done (`details.done === false`: the node that holds the run could
   * not be reached before any of the call left, or this node could not
   * reach the shared store); default 4, 0 turns it off. It waits 250 ms,
   * then twice as long each time up to 2 s, a fifth more or less at
   * random. A write carries an `Idempotency-Key` of its own, the same on
   * each attempt, which the node that serves it makes it once by: it is
   * made again too when its answer was lost (`details.delivered`) or it
   * is still being made (`details.in_progress`); so is a read tool's call,
   * which changes nothing.
   */
  retries?: number;
  /** The key a write carries instead of one of its own (see Paddock.withIdempotencyKey). */
  idempotencyKey?: string;
}

/** How many times a call whose error says nothing of it was done is made again (PaddockOptions.retries). */
export const defaultRetries = 4;

/** Options every call takes. */
export type CallOptions = {
  signal?: AbortSignal;
};

/** Options of a call that changes a run: refuse with conflict if the run's last seq is not expectSeq. */
export type SeqOptions = CallOptions & {
  expectSeq?: number;
};

type Answer = { data?: unknown; error?: unknown; response: Response };

/**
 * A client of one paddock daemon.
 *
 * ```ts
 * await using paddock = new Paddock({ transport: unixSocket() });
 * const runs = await paddock.runs.list({ project: "app" });
 * ```
 */
export class Paddock {
  /** The generated openapi-fetch client, typed by openapi.json's paths, for anything the methods below do not cover. */
  readonly api: FetchClient<paths>;
  readonly transport: Transport;
  readonly options: Readonly<PaddockOptions>;
  readonly #owned: boolean;

  constructor(options: PaddockOptions = {}) {
    if (options.idempotencyKey !== undefined) checkIdempotencyKey(options.idempotencyKey);
    this.#owned = options.transport === undefined;
    this.transport = options.transport ?? fromEnv();
    this.options = { ...options, transport: this.transport };
    this.api = createClient<paths>({ baseUrl: this.transport.baseUrl, fetch: (req) => this.#fetchRetrying(req) });
  }

  /** A client on the same transport that sends token instead (a run's token, a principal's). */
  withToken(token: string): Paddock {
    return new Paddock({ ...this.options, token });
  }

  /**
   * A client on the same transport whose writes carry key as their
   * `Idempotency-Key` instead of a key of their own: a caller that keeps
   * the key (an orchestrator that may itself restart) makes the write
   * again with it, and gets the first write's answer if it was done. One
   * key names one call: make one write with the client it gives. Throws
   * a TypeError for a key the daemon refuses (1 to 128 printable ASCII
   * characters, no space).
   */
  withIdempotencyKey(key: string): Paddock {
    return new Paddock({ ...this.options, idempotencyKey: checkIdempotencyKey(key) });
  }


  /** A client on the same transport whose calls are made for a run's agent (the Paddock-Agent header). */
  forAgent(): Paddock {
    return new Paddock({ ...this.options, agent: true });
  }

  /** The bearer token this client sends, if any. */
  get token(): string | undefined {
    return this.options.token ?? this.transport.token;
  }

  /**
   * fetch through the daemon's transport with this client's credentials:
   * a path ("/v1/runs") or a full URL under transport.baseUrl. It is what
   * the generated client, the event streams and MCP use.
   */
  fetch = async (input: string | URL | Request, init: FetchInit = {}): Promise<Response> => {
    const isReq = typeof input === "object" && !(input instanceof URL);
    const headers = new Headers(isReq ? (input as Request).headers : undefined);
    new Headers(init.headers).forEach((v, k) => headers.set(k, v));
    const token = this.token;
    if (token && !headers.has("authorization")) headers.set("Authorization", `Bearer ${token}`);
    if (this.options.agent) headers.set("Paddock-Agent", "1");
    const method = (init.method ?? (isReq ? (input as Request).method : "GET")).toUpperCase();
    const url = isReq ? (input as Request).url : String(input);
    this.options.onRequest?.(method, new URL(url, this.transport.baseUrl).pathname);
    return transportFetch(this.transport, input, { ...init, headers });
  };

  /** The generated calls' fetch: fetch, made again as PaddockOptions.retries says. */
  #fetchRetrying = async (req: Request): Promise<Response> => {
    const retries = Math.max(0, this.options.retries ?? defaultRetries);
    const keyed = keyRequest(req, this.options.idempotencyKey);
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= retries;
      const res = await this.fetch(last ? req : req.clone());
      if (res.ok || last || !(await retryable(res, keyed)) || !(await retryWait(attempt, req.signal))) return res;
    }
  };

  /** The envelope's data of a generated call's answer, or its error thrown. */
  async unwrap<T>(p: Promise<Answer>): Promise<T> {
    const { data, error, response } = await p;
    if (error !== undefined || !response.ok) {
      throw toError(error, response);
    }
    const env = data as { ok?: boolean; data?: unknown } | undefined;
    if (!env || env.ok !== true) {
      throw new TransportError(`${response.url}: status ${response.status} without paddock's envelope`);
    }
    return env.data as T;
  }

  /** Closes the transport if this client made it (the one fromEnv() gave). */
  async close(): Promise<void> {
    if (this.#owned) await this.transport.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- the daemon ----

  /** Liveness. */
  health(o: CallOptions = {}): Promise<DataOf<"health">> {
    return this.unwrap(this.api.GET("/healthz", o));
  }
  /** The API document, openapi.json, as the daemon serves it. */
  async openapi(o: CallOptions = {}): Promise<Record<string, unknown>> {
    const res = await this.fetch("/v1/openapi.json", { signal: o.signal });
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as Record<string, unknown>;
  }
  /** The daemon's Prometheus metrics, as text (the operator's). */
  async metrics(o: CallOptions = {}): Promise<string> {
    const res = await this.fetch("/metrics", { signal: o.signal });
    if (!res.ok) throw await errorOf(res);
    return res.text();
  }
  /** The daemon's version, pid, socket, TCP listener and recovery report. */
  status(o: CallOptions = {}): Promise<DataOf<"getStatus">> {
    return this.unwrap(this.api.GET("/v1/status", o));
  }
  /** What the daemon can enforce on this machine. */
  doctor(o: CallOptions = {}): Promise<DataOf<"doctor">> {
    return this.unwrap(this.api.GET("/v1/doctor", o));
  }
  /** Reconcile records and disk; clean orphans (never anything retained). */
  gc(body: BodyOf<"gc"> = {}, o: CallOptions = {}): Promise<DataOf<"gc">> {
    return this.unwrap(this.api.POST("/v1/gc", { body, ...o }));
  }
  /** A one-time login URL to the review page. */
  uiLogin(o: CallOptions = {}): Promise<DataOf<"uiLogin">> {
    return this.unwrap(this.api.POST("/v1/ui/login", o));
  }
  /** The nodes that share this daemon's store (unsupported on a daemon of its own). */
  nodes(o: CallOptions = {}): Promise<DataOf<"listNodes">> {
    return this.unwrap(this.api.GET("/v1/nodes", o));
  }
  /** Who the daemon takes this client for. */
  whoami(o: CallOptions = {}): Promise<DataOf<"whoAmI">> {
    return this.unwrap(this.api.GET("/v1/whoami", o));
  }

  /**
   * Bind a new run to a project, an agent definition, the task, its
   * inputs and a base. The session holds the run's token (shown once) and
   * a client that uses it; disposing of it rejects the run unless its
   * change set was submitted.
   */
  async bootstrap(body: BodyOf<"bootstrap">, o: CallOptions = {}): Promise<RunSession> {
    const res = await this.unwrap<DataOf<"bootstrap">>(this.api.POST("/v1/bootstrap", { body, ...o }));
    return new RunSession(this, res.run!, res.token);
  }

  /** A session over an existing run (no token of its own: its agent calls are this client's, marked as the agent's). */
  session(run: DataOf<"getRun">): RunSession {
    return new RunSession(this, run);
  }

  /** The notices of every run (submits, approvals, applies, …), followed across reconnections: each notice once, in order. */
  notices(o: FollowOptions & { types?: string[] } = {}): AsyncGenerator<Notice> {
    return followNotices(this, o);
  }

  readonly projects = {
    list: (o: CallOptions = {}): Promise<DataOf<"listProjects">> => this.unwrap(this.api.GET("/v1/projects", o)),
    add: (body: BodyOf<"addProject">, o: CallOptions = {}): Promise<DataOf<"addProject">> =>
      this.unwrap(this.api.POST("/v1/projects", { body, ...o })),
    get: (name: string, o: CallOptions = {}): Promise<DataOf<"getProject">> =>
      this.unwrap(this.api.GET("/v1/projects/{name}", { params: { path: { name } }, ...o })),
    set: (name: string, body: BodyOf<"setProject">, o: CallOptions = {}): Promise<DataOf<"setProject">> =>
      this.unwrap(this.api.PATCH("/v1/projects/{name}", { params: { path: { name } }, body, ...o })),
    remove: (name: string, o: CallOptions = {}): Promise<DataOf<"removeProject">> =>
      this.unwrap(this.api.DELETE("/v1/projects/{name}", { params: { path: { name } }, ...o })),
    /** Force-release the project lock. */
    unlock: (name: string, body: BodyOf<"unlockProject"> = {}, o: CallOptions = {}): Promise<DataOf<"unlockProject">> =>
      this.unwrap(this.api.POST("/v1/projects/{name}/unlock", { params: { path: { name } }, body, ...o })),
    /** The capability manifest, read from the base revision. */
    manifest: (name: string, o: CallOptions = {}): Promise<DataOf<"getProjectManifest">> =>
      this.unwrap(this.api.GET("/v1/projects/{name}/manifest", { params: { path: { name } }, ...o })),
    checkout: (name: string, o: CallOptions = {}): Promise<DataOf<"getProjectCheckout">> =>
      this.unwrap(this.api.GET("/v1/projects/{name}/checkout", { params: { path: { name } }, ...o })),
  };

  readonly runs = runsGroup(this);

  readonly jobs = {
    /** Start a job in the background (agent, exec or verify); busy if one runs. */
    start: (id: string, body: BodyOf<"startJob">, o: CallOptions = {}): Promise<DataOf<"startJob">> =>
      this.unwrap(this.api.POST("/v1/runs/{id}/jobs", { params: { path: { id } }, body, ...o })),
    list: (id: string, o: CallOptions = {}): Promise<DataOf<"listJobs">> =>
      this.unwrap(this.api.GET("/v1/runs/{id}/jobs", { params: { path: { id } }, ...o })),
    /** Where the run's jobs stand: idle before its first, else its latest job and its state. */
    status: (id: string, o: CallOptions = {}): Promise<DataOf<"getJobStatus">> =>
      this.unwrap(this.api.GET("/v1/runs/{id}/status", { params: { path: { id } }, ...o })),
    get: (id: string, job: string, o: CallOptions = {}): Promise<DataOf<"getJob">> =>
      this.unwrap(this.api.GET("/v1/runs/{id}/jobs/{job}", { params: { path: { id, job } }, ...o })),
    cancel: (id: string, job: string, o: CallOptions = {}): Promise<DataOf<"cancelJob">> =>
      this.unwrap(this.api.POST("/v1/runs/{id}/jobs/{job}/cancel", { params: { path: { id, job } }, ...o })),
    /** Polls a job until it is no longer running, and answers it. */
    wait: async (id: string, job: string, o: CallOptions & { interval?: number } = {}): Promise<DataOf<"getJob">> => {
      for (;;) {
        const j = await this.jobs.get(id, job, o);
        if (j.state !== "running") return j;
        await sleep(o.interval ?? 100, o.signal);
      }
    },
  };

  readonly queue = {
    /** The merge queue (all: landed, removed and undone entries too). */
    list: (query: QueryOf<"listQueue"> = {}, o: CallOptions = {}): Promise<DataOf<"listQueue">> =>
      this.unwrap(this.api.GET("/v1/queue", { params: { query }, ...o })),
    /** Queue an approved run to land on a branch. */
    add: (id: string, body: BodyOf<"queueAdd"> = {}, o: CallOptions = {}): Promise<DataOf<"queueAdd">> =>
      this.unwrap(this.api.POST("/v1/runs/{id}/queue", { params: { path: { id } }, body, ...o })),
    get: (id: string, o: CallOptions = {}): Promise<DataOf<"getQueueEntry">> =>
      this.unwrap(this.api.GET("/v1/runs/{id}/queue", { params: { path: { id } }, ...o })),
    remove: (id: string, o: CallOptions = {}): Promise<DataOf<"queueRemove">> =>
      this.unwrap(this.api.DELETE("/v1/runs/{id}/queue", { params: { path: { id } }, ...o })),
    undo: (id: string, o: CallOptions = {}): Promise<DataOf<"queueUndo">> =>
      this.unwrap(this.api.POST("/v1/runs/{id}/queue/undo", { params: { path: { id } }, ...o })),
    /** Polls a run's queue entry while it is queued, testing or landing, and answers it (landed, returned, …). */
    settle: async (id: string, o: CallOptions & { interval?: number } = {}): Promise<DataOf<"getQueueEntry">> => {
      for (;;) {
        const e = await this.queue.get(id, o);
        if (!["queued", "testing", "landing"].includes(e.state ?? "")) return e;
        await sleep(o.interval ?? 100, o.signal);
      }
    },
  };

  readonly bundles = {
    /** The public key the daemon signs bundles with. */
    key: (o: CallOptions = {}): Promise<DataOf<"getBundleKey">> => this.unwrap(this.api.GET("/v1/bundle-key", o)),
    /** The run's submitted change set as one signed bundle (a tar). */
    get: async (id: string, o: CallOptions = {}): Promise<Uint8Array> => {
      const res = await this.fetch(`/v1/runs/${encodeURIComponent(id)}/bundle`, { signal: o.signal });
      if (!res.ok) throw await errorOf(res);
      return new Uint8Array(await res.arrayBuffer());
    },
    /** Restore a run from a bundle. */
    import: async (bundle: Uint8Array, query: QueryOf<"importBundle">, o: CallOptions = {}): Promise<DataOf<"importBundle">> => {
      const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
      const res = await this.fetch(`/v1/import?${qs}`, {
        method: "POST",
        body: bundle as unknown as BodyInit,
        headers: { "Content-Type": "application/vnd.paddock.bundle+tar" },
        signal: o.signal,
      });
      return envelopeOf(res);
    },
  };

  readonly flows = {
    start: (body: BodyOf<"startFlow">, o: CallOptions = {}): Promise<DataOf<"startFlow">> =>
      this.unwrap(this.api.POST("/v1/flows", { body, ...o })),
    list: (query: QueryOf<"listFlows"> = {}, o: CallOptions = {}): Promise<DataOf<"listFlows">> =>
      this.unwrap(this.api.GET("/v1/flows", { params: { query }, ...o })),
    get: (flow: string, o: CallOptions = {}): Promise<DataOf<"getFlow">> =>
      this.unwrap(this.api.GET("/v1/flows/{flow}", { params: { path: { flow } }, ...o })),
    /** Pick an event from a run's menu (its agent's move in the flow). */
    pick: (id: string, event: string, body: BodyOf<"pickEvent"> = {}, o: CallOptions = {}): Promise<DataOf<"pickEvent">> =>
      this.unwrap(this.api.POST("/v1/runs/{id}/menu/{event}", { params: { path: { id, event } }, body, ...o })),
  };

  readonly agents = {
    list: (o: CallOptions = {}): Promise<DataOf<"listAgents">> => this.unwrap(this.api.GET("/v1/agents", o)),
    /** Store an agent definition (its TOML in body.source). */
    add: (body: BodyOf<"addAgent">, o: CallOptions = {}): Promise<DataOf<"addAgent">> =>
      this.unwrap(this.api.POST("/v1/agents", { body, ...o })),
    get: (name: string, o: CallOptions = {}): Promise<DataOf<"getAgent">> =>
      this.unwrap(this.api.GET("/v1/agents/{name}", { params: { path: { name } }, ...o })),
    remove: (name: string, o: CallOptions = {}): Promise<DataOf<"removeAgent">> =>
      this.unwrap(this.api.DELETE("/v1/agents/{name}", { params: { path: { name } }, ...o })),
  };

  readonly principals = {
    add: (body: BodyOf<"addPrincipal">, o: CallOptions = {}): Promise<DataOf<"addPrincipal">> =>
      this.unwrap(this.api.POST("/v1/principals", { body, ...o })),
    list: (o: CallOptions = {}): Promise<DataOf<"listPrincipals">> => this.unwrap(this.api.GET("/v1/principals", o)),
    get: (name: string, o: CallOptions = {}): Promise<DataOf<"getPrincipal">> =>
      this.unwrap(this.api.GET("/v1/principals/{name}", { params: { path: { name } }, ...o })),
    set: (name: string, body: BodyOf<"setPrincipal">, o: CallOptions = {}): Promise<DataOf<"setPrincipal">> =>
      this.unwrap(this.api.PATCH("/v1/principals/{name}", { params: { path: { name } }, body, ...o })),
    remove: (name: string, o: CallOptions = {}): Promise<DataOf<"removePrincipal">> =>
      this.unwrap(this.api.DELETE("/v1/principals/{name}", { params: { path: { name } }, ...o })),
  };

  readonly tokens = {
    /** Make a principal's token; its secret (token) is shown once. */
    create: (body: BodyOf<"createToken">, o: CallOptions = {}): Promise<DataOf<"createToken">> =>
      this.unwrap(this.api.POST("/v1/tokens", { body, ...o })),
    list: (query: QueryOf<"listTokens"> = {}, o: CallOptions = {}): Promise<DataOf<"listTokens">> =>
      this.unwrap(this.api.GET("/v1/tokens", { params: { query }, ...o })),
    revoke: (token: string, o: CallOptions = {}): Promise<DataOf<"revokeToken">> =>
      this.unwrap(this.api.DELETE("/v1/tokens/{token}", { params: { path: { token } }, ...o })),
  };
}

/** The runs' methods: a run's life, its tools and commands, its change set and its decisions. */
function runsGroup(p: Paddock) {
  const path = (id: string) => ({ path: { id } });
  const seq = (id: string, o: SeqOptions) => ({
    params: { path: { id }, query: o.expectSeq === undefined ? {} : { expect_seq: o.expectSeq } },
    signal: o.signal,
  });
  return {
    list: (query: QueryOf<"listRuns"> = {}, o: CallOptions = {}): Promise<DataOf<"listRuns">> =>
      p.unwrap(p.api.GET("/v1/runs", { params: { query }, ...o })),
    /** Create a run and its workspace (no agent bound: see Paddock.bootstrap). */
    create: (body: BodyOf<"createRun">, o: CallOptions = {}): Promise<DataOf<"createRun">> =>
      p.unwrap(p.api.POST("/v1/runs", { body, ...o })),
    get: (id: string, o: CallOptions = {}): Promise<DataOf<"getRun">> => p.unwrap(p.api.GET("/v1/runs/{id}", { params: path(id), ...o })),
    /** Remove a run's workspace and hide the run. */
    remove: (id: string, o: SeqOptions = {}): Promise<DataOf<"removeRun">> => p.unwrap(p.api.DELETE("/v1/runs/{id}", seq(id, o))),
    retain: (id: string, o: SeqOptions = {}): Promise<DataOf<"retainRun">> => p.unwrap(p.api.POST("/v1/runs/{id}/retain", seq(id, o))),
    reject: (id: string, o: SeqOptions = {}): Promise<DataOf<"rejectRun">> => p.unwrap(p.api.POST("/v1/runs/{id}/reject", seq(id, o))),
    /** Make (or find) the review run of the run's submitted change set. */
    review: (id: string, body: BodyOf<"reviewRun"> = {}, o: CallOptions = {}): Promise<DataOf<"reviewRun">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/review", { params: path(id), body, ...o })),
    fork: (id: string, body: BodyOf<"forkRun"> = {}, o: CallOptions = {}): Promise<DataOf<"forkRun">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/fork", { params: path(id), body, ...o })),
    checkpoint: (id: string, body: BodyOf<"checkpointRun"> = {}, o: SeqOptions = {}): Promise<DataOf<"checkpointRun">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/checkpoint", { ...seq(id, o), body })),
    resume: (id: string, o: SeqOptions = {}): Promise<DataOf<"resumeRun">> => p.unwrap(p.api.POST("/v1/runs/{id}/resume", seq(id, o))),
    /** Restore a lost node's run on this node (a shared store's). */
    adopt: (id: string, o: CallOptions = {}): Promise<DataOf<"adoptRun">> => p.unwrap(p.api.POST("/v1/runs/{id}/adopt", { params: path(id), ...o })),
    /** One of the run's artifacts: task, plan, events, changeset, diff, summary, result, logs. */
    artifact: (id: string, kind: operations["getArtifact"]["parameters"]["path"]["kind"], o: CallOptions = {}): Promise<DataOf<"getArtifact">> =>
      p.unwrap(p.api.GET("/v1/runs/{id}/artifacts/{kind}", { params: { path: { id, kind } }, ...o })),
    /** Events after a seq; with wait (a Go duration, "30s"), held until one arrives. */
    events: (id: string, query: QueryOf<"listEvents"> = {}, o: CallOptions = {}): Promise<DataOf<"listEvents">> =>
      p.unwrap(p.api.GET("/v1/runs/{id}/events", { params: { path: { id }, query }, ...o })),
    /** The run's events as they come, over SSE: resumed after the last seq seen when the connection drops, so each event comes once, in order. */
    follow: (id: string, o: FollowOptions = {}) => followEvents(p, id, o),
    tools: (id: string, o: CallOptions = {}): Promise<DataOf<"listTools">> => p.unwrap(p.api.GET("/v1/runs/{id}/tools", { params: path(id), ...o })),
    /** Run a working tool (read, write, edit, glob, grep, …, or plan) with its arguments. */
    callTool: (id: string, name: string, args: Record<string, unknown> = {}, o: SeqOptions = {}): Promise<DataOf<"callTool">> =>
      p.unwrap(
        p.api.POST("/v1/runs/{id}/tools/{name}", {
          params: { path: { id, name }, query: o.expectSeq === undefined ? {} : { expect_seq: o.expectSeq } },
          body: args as BodyOf<"callTool">,
          signal: o.signal,
        }),
      ),
    /** Deliver a file into the run's .paddock/inbox/. */
    deliver: async (id: string, name: string, body: Uint8Array | string, o: CallOptions = {}): Promise<DataOf<"deliverInbox">> => {
      const res = await p.fetch(`/v1/runs/${encodeURIComponent(id)}/inbox?name=${encodeURIComponent(name)}`, {
        method: "POST",
        body: body as unknown as BodyInit,
        headers: { "Content-Type": "application/octet-stream" },
        signal: o.signal,
      });
      return envelopeOf(res);
    },
    /** Run a command in the workspace, confined; its whole output in the result. */
    exec: (id: string, body: BodyOf<"exec">, o: SeqOptions = {}): Promise<DataOf<"exec">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/exec", { ...seq(id, o), body })),
    /** Run a command, its output streamed as it comes (stdin given whole, up front). */
    execStream: (id: string, req: BodyOf<"execStream">, o: StreamOptions = {}): ExecProcess => execStream(p, id, req, o),
    /** Run a command attached: stdin streamed as it is read, a terminal if asked, output as it comes. */
    execAttach: (id: string, req: BodyOf<"execAttach">, o: AttachOptions = {}): ExecProcess => execAttach(p, id, req, o),
    changeSet: (id: string, o: CallOptions = {}): Promise<DataOf<"getChangeSet">> =>
      p.unwrap(p.api.GET("/v1/runs/{id}/changeset", { params: path(id), ...o })),
    /** The whole unified diff (credentials masked), of the change set with hash or as it is now, and its hash. */
    diff: async (id: string, query: QueryOf<"getChangeSetDiff"> = {}, o: CallOptions = {}): Promise<{ diff: string; hash: string }> => {
      const qs = query.hash ? `?hash=${encodeURIComponent(query.hash)}` : "";
      const res = await p.fetch(`/v1/runs/${encodeURIComponent(id)}/changeset/diff${qs}`, { signal: o.signal });
      if (!res.ok) throw await errorOf(res);
      return { diff: await res.text(), hash: res.headers.get("Paddock-Changeset-Hash") ?? "" };
    },
    /** Which tool calls and commands wrote each hunk. */
    blame: (id: string, query: QueryOf<"blameChangeSet"> = {}, o: CallOptions = {}): Promise<DataOf<"blameChangeSet">> =>
      p.unwrap(p.api.GET("/v1/runs/{id}/changeset/blame", { params: { path: { id }, query }, ...o })),
    /** Freeze the change set (with expect_hash: only if it is still that one). */
    submit: (id: string, body: BodyOf<"submit"> = {}, o: SeqOptions = {}): Promise<DataOf<"submit">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/submit", { ...seq(id, o), body })),
    /** Approve the frozen change set by its hash. */
    approve: (id: string, body: BodyOf<"approve">, o: SeqOptions = {}): Promise<DataOf<"approve">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/approve", { ...seq(id, o), body })),
    /** Apply the approved change set: to a new branch, or into the working tree. */
    apply: (id: string, body: BodyOf<"apply"> = {}, o: SeqOptions = {}): Promise<DataOf<"apply">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/apply", { ...seq(id, o), body })),
    undo: (id: string, o: SeqOptions = {}): Promise<DataOf<"undo">> => p.unwrap(p.api.POST("/v1/runs/{id}/undo", seq(id, o))),
    capabilities: (id: string, o: CallOptions = {}): Promise<DataOf<"getCapabilities">> =>
      p.unwrap(p.api.GET("/v1/runs/{id}/capabilities", { params: path(id), ...o })),
    /** Run the manifest's checks in a check run; the result is tied to the change set's hash. */
    verify: (id: string, body: BodyOf<"verify"> = {}, o: CallOptions = {}): Promise<DataOf<"verify">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/verify", { params: path(id), body, ...o })),
    accessRequests: (id: string, o: CallOptions = {}): Promise<DataOf<"listAccessRequests">> =>
      p.unwrap(p.api.GET("/v1/runs/{id}/requests", { params: path(id), ...o })),
    requestAccess: (id: string, body: BodyOf<"requestAccess">, o: CallOptions = {}): Promise<DataOf<"requestAccess">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/requests", { params: path(id), body, ...o })),
    grant: (id: string, request: string, body: BodyOf<"grantAccess"> = {}, o: CallOptions = {}): Promise<DataOf<"grantAccess">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/requests/{request}/grant", { params: { path: { id, request } }, body, ...o })),
    deny: (id: string, request: string, body: BodyOf<"denyAccess"> = {}, o: CallOptions = {}): Promise<DataOf<"denyAccess">> =>
      p.unwrap(p.api.POST("/v1/runs/{id}/requests/{request}/deny", { params: { path: { id, request } }, body, ...o })),
  };
}

/** The error an answer that is not OK stands for. */
function toError(error: unknown, response: Response): Error {
  const e = error as { ok?: boolean; error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined;
  if (e && typeof e === "object" && e.error && typeof e.error === "object") return paddockError(e.error, response.status);
  return new TransportError(`${new URL(response.url).pathname}: status ${response.status} without paddock's envelope: ${String(error).slice(0, 200)}`);
}

/** The PaddockError of an answer that is not OK, its body read. */
export async function errorOf(res: Response): Promise<Error> {
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not an envelope: reported as such
  }
  return toError(body, res);
}

/** The data of an answer's envelope, or its error thrown. */
export async function envelopeOf<T>(res: Response): Promise<T> {
  if (!res.ok) throw await errorOf(res);
  const env = (await res.json()) as { ok?: boolean; data?: T };
  if (env.ok !== true) throw new TransportError(`${new URL(res.url).pathname}: status ${res.status} without paddock's envelope`);
  return env.data as T;
}

/** Resolves after ms, or rejects when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The header a write's idempotency key travels in. */
export const idempotencyHeader = "Idempotency-Key";

/** key, if the daemon takes it (1 to 128 printable ASCII characters, no space); a TypeError otherwise. */
function checkIdempotencyKey(key: string): string {
  if (typeof key !== "string" || !/^[\x21-\x7e]{1,128}$/.test(key)) {
    throw new TypeError(`an idempotency key is 1 to 128 printable ASCII characters without spaces, not ${JSON.stringify(key)}`);
  }
  return key;
}

/** The tools whose calls read: sent without a key, made again as they are (as the Go client). */
const readTools = new Set(["glob", "grep", "list", "read", "stat", "diff", "capabilities"]);

/**
 * Whether req is made again when its answer was lost: a write (POST, PUT,
 * PATCH, DELETE), given an idempotency key (key, the caller's, or else one
 * of its own) unless it has one, or a read tool's call, which needs none.
 * A bundle's import (its body up to 2 GiB, more than a node reads whole
 * for a key) takes none.
 */
function keyRequest(req: Request, key?: string): boolean {
  if (!["POST", "PUT", "PATCH", "DELETE"].includes(req.method.toUpperCase())) return false;
  const path = new URL(req.url).pathname;
  if (path === "/v1/import") return false;
  const tool = /^\/v1\/runs\/[^/]+\/tools\/([^/]+)$/.exec(path);
  if (tool && readTools.has(decodeURIComponent(tool[1]!))) return true;
  if (!req.headers.has(idempotencyHeader)) req.headers.set(idempotencyHeader, key || crypto.randomUUID());
  return true;
}

/**
 * Whether an error answer is made again: it says nothing of its call was
 * done (details.done === false), or, for a keyed call (or a read), that
 * its answer may be lost (details.delivered) or it is still being made
 * (details.in_progress); res is left to be read.
 */
async function retryable(res: Response, keyed: boolean): Promise<boolean> {
  try {
    const env = (await res.clone().json()) as { error?: { details?: { done?: unknown; delivered?: unknown; in_progress?: unknown } } };
    const d = env?.error?.details;
    return d?.done === false || (keyed && (d?.delivered === true || d?.in_progress === true));
  } catch {
    return false;
  }
}

/** Waits before the attempt after attempt; false if signal ended it first. */
function retryWait(attempt: number, signal?: AbortSignal | null): Promise<boolean> {
  const d = Math.min(250 * 2 ** attempt, 2000);
  const ms = d * (0.8 + 0.4 * Math.random());
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(ok);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
