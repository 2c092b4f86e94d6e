// WASI 0.2 for a component that imports it, granting nothing, as the Rust
// host's empty WasiCtx does: no environment, arguments, preopened
// directories, input or network; output goes nowhere; clocks tell the time.
// The shipped guest imports none of this; a component built with Rust's std
// (such as the hostile test fixture) does. This module must never reach the
// file system, the network or the process's environment.

class Pollable {
  ready() {
    return true;
  }

  block() {}
}

class InputStream {
  read() {
    throw { tag: 'closed' };
  }

  blockingRead() {
    throw { tag: 'closed' };
  }

  skip() {
    throw { tag: 'closed' };
  }

  blockingSkip() {
    throw { tag: 'closed' };
  }

  subscribe() {
    return new Pollable();
  }
}

/** Accepts every write and keeps none of it. */
class OutputStream {
  checkWrite() {
    return 1n << 20n;
  }

  write() {}

  blockingWriteAndFlush() {}

  flush() {}

  blockingFlush() {}

  writeZeroes() {}

  blockingWriteZeroesAndFlush() {}

  subscribe() {
    return new Pollable();
  }
}

/** A resource class that grants nothing: each is a class of its own, as jco checks handles by class. */
const resource = () => class {};

const denied = () => {
  throw 'access-denied';
};

/** The WASI imports by unversioned interface name, as jco's sync instantiation asks for them. */
export function deniedWasi() {
  const network = resource();
  const stdin = new InputStream();
  const stdout = new OutputStream();
  const stderr = new OutputStream();
  const interfaces = {
    'wasi:cli/environment': { getEnvironment: () => [], getArguments: () => [], initialCwd: () => undefined },
    'wasi:cli/exit': {
      exit: () => {
        throw new Error('the guest called exit');
      },
    },
    'wasi:cli/stdin': { getStdin: () => stdin },
    'wasi:cli/stdout': { getStdout: () => stdout },
    'wasi:cli/stderr': { getStderr: () => stderr },
    'wasi:cli/terminal-input': { TerminalInput: resource() },
    'wasi:cli/terminal-output': { TerminalOutput: resource() },
    'wasi:cli/terminal-stdin': { getTerminalStdin: () => undefined },
    'wasi:cli/terminal-stdout': { getTerminalStdout: () => undefined },
    'wasi:cli/terminal-stderr': { getTerminalStderr: () => undefined },
    'wasi:clocks/monotonic-clock': {
      now: () => process.hrtime.bigint(),
      resolution: () => 1n,
      subscribeDuration: () => new Pollable(),
      subscribeInstant: () => new Pollable(),
    },
    'wasi:clocks/wall-clock': {
      now: () => {
        const ms = BigInt(Date.now());
        return { seconds: ms / 1000n, nanoseconds: Number(ms % 1000n) * 1_000_000 };
      },
      resolution: () => ({ seconds: 0n, nanoseconds: 1_000_000 }),
    },
    'wasi:filesystem/preopens': { getDirectories: () => [] },
    'wasi:filesystem/types': {
      Descriptor: resource(),
      DirectoryEntryStream: resource(),
      filesystemErrorCode: () => undefined,
    },
    'wasi:io/error': { Error: resource() },
    'wasi:io/poll': { Pollable, poll: (list) => new Uint32Array(list.map((_, i) => i)) },
    'wasi:io/streams': { InputStream, OutputStream },
    'wasi:random/random': {
      getRandomBytes: (n) => crypto.getRandomValues(new Uint8Array(Number(n))),
      getRandomU64: () => crypto.getRandomValues(new BigUint64Array(1))[0],
    },
    'wasi:random/insecure': {
      getInsecureRandomBytes: (n) => crypto.getRandomValues(new Uint8Array(Number(n))),
      getInsecureRandomU64: () => crypto.getRandomValues(new BigUint64Array(1))[0],
    },
    'wasi:random/insecure-seed': { insecureSeed: () => [0n, 0n] },
    'wasi:sockets/network': { Network: network },
    'wasi:sockets/instance-network': { instanceNetwork: () => new network() },
    'wasi:sockets/tcp': { TcpSocket: resource() },
    'wasi:sockets/tcp-create-socket': { createTcpSocket: denied },
    'wasi:sockets/udp': {
      UdpSocket: resource(),
      IncomingDatagramStream: resource(),
      OutgoingDatagramStream: resource(),
    },
    'wasi:sockets/udp-create-socket': { createUdpSocket: denied },
    'wasi:sockets/ip-name-lookup': { ResolveAddressStream: resource(), resolveAddresses: denied },
  };
  return interfaces;
}
