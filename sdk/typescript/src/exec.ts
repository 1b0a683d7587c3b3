// Commands whose output streams: exec/stream (NDJSON lines of base64
// chunks, then the result; stdin given whole with the request) and
// exec/attach (an HTTP/1.1 Upgrade after which stdin, resizes and output
// travel as frames: stdin is sent as it is read, and a terminal can be
// asked for). Both give an ExecProcess: its output as an async iterator,
// and its result.

import { request as httpRequest, type IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Paddock } from "./client.js";
import { errorOf } from "./client.js";
import { TransportError, isUnreachable, paddockError } from "./errors.js";
import type { ExecRequest, ExecResult, TerminalSize } from "./types.js";

/** A chunk of a command's output. */
export interface OutputChunk {
  stream: "stdout" | "stderr";
  data: Uint8Array;
}

/** Options of exec/stream. */
export interface StreamOptions {
  /** What the command reads on its standard input, sent with the request (at most 16 MiB). */
  stdin?: string | Uint8Array;
  /** Ends the command: the connection drops, which kills it. */
  signal?: AbortSignal;
  expectSeq?: number;
}

/** Options of exec/attach. */
export interface AttachOptions {
  /** The command's stdin, sent as it is read; its end is the end of stdin. */
  stdin?: AsyncIterable<Uint8Array | string> | ReadableStream<Uint8Array | string>;
  /** The terminal's new sizes, when the request asks for one (req.terminal). */
  resize?: AsyncIterable<TerminalSize>;
  signal?: AbortSignal;
  expectSeq?: number;
}

/**
 * A running command: iterate it for its output as it comes; `result`
 * resolves to its result (its output not in it: it was streamed) or
 * rejects with the PaddockError that ended it. Output nobody reads is kept
 * until it is read; `text()` gathers it all.
 */
export class ExecProcess implements AsyncIterable<OutputChunk> {
  readonly result: Promise<ExecResult>;
  #chunks: OutputChunk[] = [];
  #wake: (() => void) | undefined;
  #done = false;
  #error: unknown;
  #resolve!: (r: ExecResult) => void;
  #reject!: (e: unknown) => void;

  constructor() {
    this.result = new Promise<ExecResult>((res, rej) => {
      this.#resolve = res;
      this.#reject = rej;
    });
    this.result.catch(() => {}); // the iterator reports it too; never unhandled
  }

  /** @internal */
  push(c: OutputChunk): void {
    this.#chunks.push(c);
    this.#wake?.();
  }
  /** @internal */
  end(r: ExecResult): void {
    if (this.#done) return;
    this.#done = true;
    this.#resolve(r);
    this.#wake?.();
  }
  /** @internal */
  fail(err: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#error = err;
    this.#reject(err);
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<OutputChunk> {
    for (;;) {
      while (this.#chunks.length) yield this.#chunks.shift()!;
      if (this.#done) {
        if (this.#error !== undefined) throw this.#error;
        return;
      }
      await new Promise<void>((r) => (this.#wake = r));
      this.#wake = undefined;
    }
  }

  /** Waits for the end; the result with the whole stdout and stderr, decoded as UTF-8. */
  async text(): Promise<ExecResult & { stdout: string; stderr: string }> {
    const out: Record<"stdout" | "stderr", Uint8Array[]> = { stdout: [], stderr: [] };
    for await (const c of this) out[c.stream].push(c.data);
    const res = await this.result;
    const dec = (parts: Uint8Array[]) => new TextDecoder().decode(Buffer.concat(parts));
    return { ...res, stdout: dec(out.stdout), stderr: dec(out.stderr) };
  }
}

function seqQuery(expectSeq?: number): string {
  return expectSeq === undefined ? "" : `?expect_seq=${expectSeq}`;
}

/** POST /v1/runs/{id}/exec/stream. */
export function execStream(p: Paddock, id: string, req: ExecRequest, o: StreamOptions = {}): ExecProcess {
  const proc = new ExecProcess();
  const body: ExecRequest = { ...req };
  if (o.stdin !== undefined) body.stdin = Buffer.from(o.stdin).toString("base64");
  (async () => {
    const res = await p.fetch(`/v1/runs/${encodeURIComponent(id)}/exec/stream${seqQuery(o.expectSeq)}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: o.signal,
    });
    if (!res.ok || !res.headers.get("content-type")?.startsWith("application/x-ndjson") || !res.body) throw await errorOf(res);
    const decoder = new TextDecoder();
    let buf = "";
    for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(part, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const l = JSON.parse(line) as { stream?: string; data?: string; result?: ExecResult; error?: { code: string; message: string } };
        if (l.error) return proc.fail(paddockError(l.error));
        if (l.result) return proc.end(l.result);
        if (l.stream === "stdout" || l.stream === "stderr") proc.push({ stream: l.stream, data: Buffer.from(l.data ?? "", "base64") });
      }
    }
    throw new TransportError("exec: the stream ended before the command's result (did the daemon stop?)");
  })().catch((err) => proc.fail(o.signal?.aborted ? o.signal.reason : err));
  return proc;
}

// The frames of an attached exec (attach.go): one kind byte, the
// payload's length (4 bytes, big-endian), the payload.
const FrameStdin = 0x69; // 'i'
const FrameResize = 0x72; // 'r'
const FrameEOF = 0x65; // 'e'
const FrameStdout = 0x6f; // 'o'
const FrameStderr = 0x45; // 'E'
const FrameResult = 0x52; // 'R'
const maxClientFrame = 64 << 10;

function frame(kind: number, payload: Uint8Array = new Uint8Array()): Buffer {
  const b = Buffer.alloc(5 + payload.length);
  b[0] = kind;
  b.writeUInt32BE(payload.length, 1);
  b.set(payload, 5);
  return b;
}

/** POST /v1/runs/{id}/exec/attach: the HTTP/1.1 Upgrade, made with node:http (fetch cannot). */
export function execAttach(p: Paddock, id: string, req: ExecRequest, o: AttachOptions = {}): ExecProcess {
  const proc = new ExecProcess();
  const path = `/v1/runs/${encodeURIComponent(id)}/exec/attach${seqQuery(o.expectSeq)}`;
  const body = Buffer.from(JSON.stringify(req));
  const t = p.transport;
  const headers: Record<string, string> = {
    Host: new URL(t.baseUrl).host,
    "Content-Type": "application/json",
    "Content-Length": String(body.length),
    Connection: "Upgrade",
    Upgrade: "paddock-attach",
  };
  if (p.token) headers.Authorization = `Bearer ${p.token}`;
  if (p.options.agent) headers["Paddock-Agent"] = "1";
  p.options.onRequest?.("POST", path.split("?")[0]!);
  const where = "socketPath" in t.endpoint ? { socketPath: t.endpoint.socketPath } : { host: t.endpoint.host, port: t.endpoint.port };
  const r = httpRequest({ ...where, method: "POST", path, headers, signal: o.signal, agent: false });
  r.on("error", (err) => {
    if (o.signal?.aborted) return proc.fail(o.signal.reason);
    proc.fail(new TransportError(isUnreachable(err) ? "paddock daemon unreachable" : `exec: ${err.message}`, { cause: err, unreachable: isUnreachable(err) }));
  });
  r.on("response", async (res: IncomingMessage) => {
    // No switch: the request was refused with an envelope.
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    try {
      const env = JSON.parse(text);
      proc.fail(env?.error ? paddockError(env.error, res.statusCode) : new TransportError(`exec: status ${res.statusCode} without an error`));
    } catch {
      proc.fail(new TransportError(`exec: status ${res.statusCode}: ${text.slice(0, 200)}`));
    }
  });
  r.on("upgrade", (_res: IncomingMessage, socket: Socket, head: Buffer) => attached(socket, head, proc, o));
  r.end(body);
  return proc;
}

function attached(socket: Socket, head: Buffer, proc: ExecProcess, o: AttachOptions): void {
  let buf = head;
  let ended = false;
  const onAbort = () => socket.destroy();
  o.signal?.addEventListener("abort", onAbort, { once: true });
  const finish = (fn: () => void) => {
    if (ended) return;
    ended = true;
    o.signal?.removeEventListener("abort", onAbort);
    fn();
    socket.destroy();
  };
  socket.on("data", (d: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    while (buf.length >= 5) {
      const n = buf.readUInt32BE(1);
      if (buf.length < 5 + n) break;
      const kind = buf[0];
      const payload = buf.subarray(5, 5 + n);
      buf = buf.subarray(5 + n);
      if (kind === FrameStdout) proc.push({ stream: "stdout", data: Buffer.from(payload) });
      else if (kind === FrameStderr) proc.push({ stream: "stderr", data: Buffer.from(payload) });
      else if (kind === FrameResult) {
        const end = JSON.parse(payload.toString("utf8")) as { result?: ExecResult; error?: { code: string; message: string } };
        return finish(() =>
          end.error ? proc.fail(paddockError(end.error)) : end.result ? proc.end(end.result) : proc.fail(new TransportError("exec: the daemon ended without a result")),
        );
      }
    }
  });
  socket.on("close", () =>
    finish(() => proc.fail(o.signal?.aborted ? o.signal.reason : new TransportError("exec: the connection closed before the command's result"))),
  );
  socket.on("error", () => {}); // close follows
  const send = (kind: number, payload?: Uint8Array) =>
    new Promise<void>((resolve, reject) => {
      if (ended || socket.destroyed) return reject(new Error("closed"));
      socket.write(frame(kind, payload), (err) => (err ? reject(err) : resolve()));
    });
  if (o.stdin) {
    (async () => {
      for await (const part of o.stdin as AsyncIterable<Uint8Array | string>) {
        const bytes = typeof part === "string" ? Buffer.from(part) : part;
        for (let i = 0; i < bytes.length; i += maxClientFrame) await send(FrameStdin, bytes.subarray(i, i + maxClientFrame));
      }
      await send(FrameEOF);
    })().catch(() => {}); // the connection ended: the result (or its failure) says how
  }
  if (o.resize) {
    (async () => {
      for await (const size of o.resize!) await send(FrameResize, Buffer.from(JSON.stringify(size)));
    })().catch(() => {});
  }
}

