// A real paddock daemon for the tests: the binary $PADDOCK_BIN (built
// from ./cmd/paddockd), serving a temporary state directory on its unix
// socket and on loopback TCP, and git repositories to declare as
// projects. Every daemon started is stopped when the test process ends,
// whatever happened.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Paddock, tcp, unixSocket, type Transport } from "@paddock/sdk";

const live = new Map<ChildProcess, string>(); // each daemon and its temporary directory
function killAll(): void {
  for (const [c, base] of live) {
    c.kill("SIGKILL");
    rmSync(base, { recursive: true, force: true });
  }
}
process.on("exit", killAll);
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(sig, () => {
    killAll();
    process.exit(1);
  });
}

export interface Daemon {
  /** The temporary directory everything is in. */
  base: string;
  home: string;
  socket: string;
  /** host:port of its TCP listener. */
  listen: string;
  /** The daemon's token (the TCP operator's credential). */
  token: string;
  log: string;
  /** A client on the unix socket (its transport the caller's to close via stop). */
  client(options?: { onRequest?: (method: string, path: string) => void }): Paddock;
  /** A transport on TCP with a token (the daemon's by default). */
  tcp(token?: string): Transport;
  logTail(n?: number): string;
  stop(): Promise<void>;
}

/** The path of the binary the tests run, from $PADDOCK_BIN. */
export function binary(): string {
  const bin = process.env.PADDOCK_BIN;
  if (!bin) throw new Error("PADDOCK_BIN is not set: build one with go build -o BIN ./cmd/paddockd and run with PADDOCK_BIN=BIN");
  return bin;
}

/** Starts `paddock serve` on a fresh state directory and waits for its socket to answer. */
export async function startDaemon(opts: { toml?: string; secrets?: Record<string, string> } = {}): Promise<Daemon> {
  const bin = binary();
  const base = mkdtempSync(join(tmpdir(), "pdk-ts-"));
  const home = join(base, "home");
  mkdirSync(join(home, "secrets"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home, "paddock.toml"), `apply_name = "Op"\napply_email = "op@example.com"\n${opts.toml ?? ""}`, { mode: 0o600 });
  for (const [name, value] of Object.entries(opts.secrets ?? {})) writeFileSync(join(home, "secrets", name), value + "\n", { mode: 0o600 });
  const log = join(base, "daemon.log");
  const fd = openSync(log, "a");
  const child = spawn(bin, ["serve", "--home", home, "--log-level", "warn", "--listen", "127.0.0.1:0"], {
    env: { ...process.env, PADDOCK_NO_AUTOSTART: "1" },
    stdio: ["ignore", fd, fd],
  });
  closeSync(fd);
  live.set(child, base);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("exit", () => live.delete(child));
  const socket = join(home, "paddock.sock");
  const transports: Transport[] = [];
  const tail = (n = 30) => {
    try {
      return readFileSync(log, "utf8").trimEnd().split("\n").slice(-n).join("\n");
    } catch (err) {
      return String(err);
    }
  };
  const stop = async () => {
    for (const t of transports.splice(0)) await t.close().catch(() => {});
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(base, { recursive: true, force: true, maxRetries: 3 });
  };
  const probe = unixSocket(socket);
  transports.push(probe);
  const c = new Paddock({ transport: probe });
  let status;
  for (let i = 0; ; i++) {
    try {
      status = await c.status();
      break;
    } catch (err) {
      if (i > 600 || child.exitCode !== null) {
        const t = tail();
        await stop();
        throw new Error(`the daemon in ${home} did not start: ${err}\n${t}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  const token = readFileSync(join(home, "token"), "utf8").trim();
  return {
    base,
    home,
    socket,
    listen: status.listen!,
    token,
    log,
    client: (o = {}) => {
      const t = unixSocket(socket);
      transports.push(t);
      return new Paddock({ transport: t, ...o });
    },
    tcp: (tok = token) => {
      const t = tcp(status.listen!, tok);
      transports.push(t);
      return t;
    },
    logTail: tail,
    stop,
  };
}

/** git, in dir. */
export function git(dir: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
  }).trim();
}

/** A git repository at dir with files committed on main. */
export function makeRepo(dir: string, files: Record<string, string>): string {
  mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "config", "user.name", "Test");
  git(dir, "config", "user.email", "test@example.com");
  commit(dir, "initial", files);
  return dir;
}

/** Writes files into the repository at dir and commits them. */
export function commit(dir: string, message: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", message);
}
