// The resumable event streams: a run's events (GET /v1/runs/{id}/events/stream,
// SSE with id = seq) and the operator's notices of every run (GET
// /v1/events/stream, id = the notice's id). Each is an async iterator that
// reconnects when the connection drops and resumes after the last id it
// gave (Last-Event-ID), skipping what it has seen: every event once, in
// order, without a gap.

import type { Paddock } from "./client.js";
import { errorOf, sleep } from "./client.js";
import { PaddockError, TransportError } from "./errors.js";
import type { Event, Notice } from "./types.js";

/** How a stream is followed. */
export interface FollowOptions {
  /** Start after this seq (or notice id); 0, the default, from the start. */
  after?: number;
  /** Ends the stream: the iterator throws the signal's reason. (Breaking out of a for-await ends it too.) */
  signal?: AbortSignal;
  /** How long to keep reconnecting to a daemon that no longer answers (a restart) before giving up; default 10 s. */
  grace?: number;
  /** The pause before a reconnection; default 200 ms. */
  retryDelay?: number;
  /** Told of each reconnection, with the id it resumes after and why the last connection ended. */
  onReconnect?: (after: number, cause: unknown) => void;
}

/** One SSE message: its id, its event name and its data. */
interface Message {
  id: string;
  event: string;
  data: string;
}

/** Parses an SSE body into messages (comments and keep-alives left out). */
async function* messages(body: ReadableStream<Uint8Array>): AsyncGenerator<Message> {
  const decoder = new TextDecoder();
  let buf = "";
  let msg: Message = { id: "", event: "", data: "" };
  let hasData = false;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
        // A CR that ends what has come so far may be half of a CRLF.
        if (buf[nl] === "\r" && nl === buf.length - 1) break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (hasData) yield msg;
          msg = { id: "", event: "", data: "" };
          hasData = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") {
          msg.data = hasData ? msg.data + "\n" + value : value;
          hasData = true;
        } else if (field === "id") msg.id = value;
        else if (field === "event") msg.event = value;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * Follows the stream at path from after on, across reconnections:
 * idOf gives the id of a message's parsed data, and a message whose id is
 * not past the last one given is left out (a replay after a reconnect).
 */
async function* follow<T>(p: Paddock, path: string, idOf: (v: T) => number, o: FollowOptions): AsyncGenerator<T> {
  let after = o.after ?? 0;
  const grace = o.grace ?? 10_000;
  let gone = 0; // when the daemon stopped answering; 0 while it answers
  let followed = false;
  for (;;) {
    o.signal?.throwIfAborted();
    let cause: unknown;
    try {
      const res = await p.fetch(path, {
        headers: { Accept: "text/event-stream", "Last-Event-ID": String(after) },
        signal: o.signal,
      });
      if (res.status !== 200 || !res.body) throw await errorOf(res);
      followed = true;
      gone = 0;
      for await (const m of messages(res.body)) {
        const v = JSON.parse(m.data) as T;
        const id = idOf(v);
        if (id <= after) continue; // seen already
        after = id;
        yield v;
      }
      cause = new TransportError("the stream ended");
    } catch (err) {
      if (o.signal?.aborted) throw o.signal.reason;
      if (err instanceof PaddockError) throw err;
      const unreachable = err instanceof TransportError && err.unreachable;
      if (unreachable && !followed) throw err;
      if (unreachable) {
        if (gone === 0) gone = Date.now();
        else if (Date.now() - gone >= grace) throw new TransportError(`the daemon has not answered for ${grace} ms`, { cause: err, unreachable: true });
      }
      cause = err;
    }
    o.onReconnect?.(after, cause);
    await sleep(o.retryDelay ?? 200, o.signal);
  }
}

/** A run's events from after on, each once, in order, across reconnections. */
export function followEvents(p: Paddock, id: string, o: FollowOptions = {}): AsyncGenerator<Event> {
  return follow<Event>(p, `/v1/runs/${encodeURIComponent(id)}/events/stream`, (e) => e.seq ?? 0, o);
}

/** The notices of every run (the operator's), of types if given, each once, in order. */
export function followNotices(p: Paddock, o: FollowOptions & { types?: string[] } = {}): AsyncGenerator<Notice> {
  const path = o.types?.length ? `/v1/events/stream?types=${encodeURIComponent(o.types.join(","))}` : "/v1/events/stream";
  return follow<Notice>(p, path, (n) => n.id ?? 0, o);
}
