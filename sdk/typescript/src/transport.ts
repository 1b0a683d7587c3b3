// Where the daemon is and how a request reaches it: its unix socket
// (whose 0600 mode is the operator's credential) or loopback TCP with a
// bearer token. A Transport is one undici dispatcher (a pool of
// connections) plus what node:http needs for the one request fetch cannot
// make (an attached exec's HTTP/1.1 Upgrade).

import { existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { Agent, fetch as undiciFetch, type Dispatcher } from "undici";
import { TransportError, isUnreachable } from "./errors.js";

/** Where a Transport connects. */
export type Endpoint = { socketPath: string } | { host: string; port: number };

/** A connection to one daemon. Close it when done (`await using` works too). */
export interface Transport {
  /** The base of every URL: http://paddock on a unix socket (the Host the daemon allows there), http://HOST:PORT on TCP. */
  readonly baseUrl: string;
  /** Where its connections go. */
  readonly endpoint: Endpoint;
  /** The bearer token it authenticates with, if any (required on TCP). */
  readonly token?: string;
  /** The undici dispatcher its requests use. */
  readonly dispatcher: Dispatcher;
  /** Closes its connections. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

class PooledTransport implements Transport {
  readonly dispatcher: Agent;
  constructor(
    readonly baseUrl: string,
    readonly endpoint: Endpoint,
    readonly token?: string,
  ) {
    this.dispatcher = new Agent({
      connect: "socketPath" in endpoint ? { socketPath: endpoint.socketPath } : {},
      // Event streams and commands stay open as long as they last: no
      // body timeout; a header timeout would cut a long exec's answer.
      bodyTimeout: 0,
      headersTimeout: 0,
      keepAliveTimeout: 4_000,
    });
  }
  async close(): Promise<void> {
    await this.dispatcher.close();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** A transport to the daemon on the unix socket at path (default: defaultSocketPath()). */
export function unixSocket(path: string = defaultSocketPath(), options: { token?: string } = {}): Transport {
  return new PooledTransport("http://paddock", { socketPath: path }, options.token);
}

/**
 * A transport to a daemon on a loopback TCP address ("127.0.0.1:7070",
 * "[::1]:7070"), authenticating with token: the daemon's (its state
 * directory's token file), a principal's (paddock token create) or a
 * run's (from bootstrap).
 */
export function tcp(address: string, token: string): Transport {
  const url = new URL(`http://${address}`);
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || 80);
  return new PooledTransport(`http://${url.host}`, { host, port }, token);
}

/** The state directory, resolved as the paddock CLI does: $PADDOCK_HOME, else $XDG_STATE_HOME/paddock, else ~/.local/state/paddock. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PADDOCK_HOME) return env.PADDOCK_HOME;
  if (env.XDG_STATE_HOME) return join(env.XDG_STATE_HOME, "paddock");
  return join(env.HOME || homedir(), ".local", "state", "paddock");
}

/** The daemon's socket in the state directory: <state dir>/paddock.sock, as the CLI and the Go client use it. */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(stateDir(env), "paddock.sock");
}

/** Where a run's commands find their run's own API socket. */
export const socketInView = "/run/paddock/api/paddock.sock";

/**
 * The transport the paddock CLI would use in this environment:
 * $PADDOCK_ADDR with $PADDOCK_TOKEN (or the state directory's token
 * file); inside a run (no $PADDOCK_HOME), $PADDOCK_SOCKET or the run's
 * socket in view; else the state directory's socket.
 */
export function fromEnv(env: NodeJS.ProcessEnv = process.env): Transport {
  if (env.PADDOCK_ADDR) {
    let token = env.PADDOCK_TOKEN;
    if (!token) {
      const file = join(stateDir(env), "token");
      try {
        token = readFileSync(file, "utf8").trim();
      } catch (err) {
        throw new TransportError(`talking to ${env.PADDOCK_ADDR} needs the token in ${file} (or $PADDOCK_TOKEN)`, { cause: err });
      }
    }
    return tcp(env.PADDOCK_ADDR, token);
  }
  if (!env.PADDOCK_HOME) {
    if (env.PADDOCK_SOCKET) return unixSocket(env.PADDOCK_SOCKET);
    if (existsSync(socketInView) && statSync(socketInView).isSocket()) return unixSocket(socketInView);
  }
  return unixSocket(defaultSocketPath(env));
}

/** What a request may carry beyond fetch's own init. */
export type FetchInit = RequestInit & { duplex?: "half" };

/**
 * Sends one request through t with fetch semantics (undici's fetch on t's
 * dispatcher): input is a path ("/v1/runs"), a URL, or a Request (as
 * openapi-fetch makes them). A failure to connect is a TransportError.
 */
export async function transportFetch(t: Transport, input: string | URL | Request, init: FetchInit = {}): Promise<Response> {
  let url: string;
  let req: FetchInit = { ...init };
  if (typeof input === "string" || input instanceof URL) {
    url = String(input).startsWith("/") ? t.baseUrl + String(input) : String(input);
  } else {
    url = input.url;
    req = {
      method: input.method,
      headers: input.headers,
      body: input.body,
      signal: input.signal,
      ...init,
    };
  }
  if (req.body && typeof (req.body as ReadableStream).getReader === "function") req.duplex = "half";
  try {
    return (await undiciFetch(url, { ...(req as any), dispatcher: t.dispatcher })) as unknown as Response;
  } catch (err) {
    if ((err as Error)?.name === "AbortError") throw err;
    const unreachable = isUnreachable(err);
    const where = "socketPath" in t.endpoint ? t.endpoint.socketPath : `${t.endpoint.host}:${t.endpoint.port}`;
    throw new TransportError(
      unreachable ? `paddock daemon unreachable at ${where}` : `${req.method ?? "GET"} ${new URL(url).pathname}: ${(err as Error)?.message}`,
      { cause: err, unreachable },
    );
  }
}
