// Symbol.asyncDispose and Symbol.dispose for runtimes without them, so that
// `await using` (which TypeScript compiles down) finds the same symbols
// the SDK's classes are keyed by. Node 20.4 and later have them already.

const s = Symbol as unknown as { asyncDispose?: symbol; dispose?: symbol };
if (typeof s.asyncDispose !== "symbol") Object.defineProperty(Symbol, "asyncDispose", { value: Symbol.for("nodejs.asyncDispose") });
if (typeof s.dispose !== "symbol") Object.defineProperty(Symbol, "dispose", { value: Symbol.for("nodejs.dispose") });

export {};
