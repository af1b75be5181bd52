// A loopback listener that records every TCP connection it receives (plain or TLS, before any
// byte is read), so a test can prove the server never dialled it; it answers HTTP through an
// optional handler for the cases where connecting is allowed. And a loopback DNS server, so a
// name can point at it.
import { createServer, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import dns2 from 'dns2'

export type Tripwire = {
  port: number
  /** connections received since the last reset */
  connections: number
  /** HTTP requests received since the last reset (a kept-alive connection carries several) */
  requests: number
  reset(): void
  close(): Promise<void>
}

export async function startTripwire(handler: RequestListener = (_req, res) => res.writeHead(404).end()): Promise<Tripwire> {
  const wire = { connections: 0, requests: 0 }
  const server = createServer((req, res) => {
    wire.requests++
    handler(req, res)
  })
  server.on('connection', () => wire.connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return Object.assign(wire, {
    port: (server.address() as AddressInfo).port,
    reset: () => void Object.assign(wire, { connections: 0, requests: 0 }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  })
}

export type Nameserver = { address: string; close(): Promise<void> }

/**
 * answers A queries for the names in `records` and TXT queries for those in `txt` (both read on
 * every query, so a test may change them); every other question gets an empty answer
 */
export async function startNameserver(records: Record<string, string>, txt: Record<string, string[]> = {}): Promise<Nameserver> {
  const { Packet } = dns2
  const server = dns2.createServer({
    udp: true,
    handle: (request: any, send: (r: any) => void) => {
      const response = Packet.createResponseFromRequest(request)
      for (const q of request.questions ?? []) {
        const address = records[String(q.name).toLowerCase()]
        if (address && q.type === Packet.TYPE.A) {
          response.answers.push({ name: q.name, type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 1, address } as never)
        }
        if (q.type === Packet.TYPE.TXT) {
          for (const data of txt[String(q.name).toLowerCase()] ?? []) {
            response.answers.push({ name: q.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 1, data } as never)
          }
        }
      }
      send(response)
    },
  })
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } })
  const { port } = (server.addresses() as { udp: AddressInfo }).udp
  return {
    address: `127.0.0.1:${port}`,
    close: async () => {
      await server.close()
    },
  }
}
