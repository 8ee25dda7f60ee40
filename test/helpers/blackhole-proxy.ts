/**
 * A TCP proxy on 127.0.0.1 in front of another loopback server (the test PostgreSQL), which can be
 * told to blackhole: from then on it forwards nothing in either direction and closes nothing, as a
 * network partition does (the client's writes are accepted by the proxy's socket, no reply ever
 * comes). Connections opened while blackholed are accepted and never answered either.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface BlackholeProxy {
  /** the proxy's port on 127.0.0.1 */
  port: number;
  /** stops forwarding, without closing any connection */
  blackhole(): void;
  /** forwards again (bytes dropped meanwhile stay dropped) */
  heal(): void;
  /** connections accepted so far */
  connections(): number;
  /** destroys every connection and stops listening */
  close(): Promise<void>;
}

export async function startBlackholeProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<BlackholeProxy> {
  let dark = false;
  let accepted = 0;
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  };
  const server: Server = createServer((client) => {
    accepted++;
    track(client);
    if (dark) return; // accepted, never answered
    const upstream = connect(targetPort, targetHost);
    track(upstream);
    client.on('data', (chunk) => {
      if (!dark) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!dark) client.write(chunk);
    });
    // (a close on either side is forwarded only while the network is up)
    client.on('close', () => {
      if (!dark) upstream.destroy();
    });
    upstream.on('close', () => {
      if (!dark) client.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('blackhole proxy: no port');
  return {
    port: address.port,
    blackhole: () => {
      dark = true;
    },
    heal: () => {
      dark = false;
    },
    connections: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
