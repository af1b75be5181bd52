// Who may open a firehose stream, decided before the WebSocket upgrade so a refusal is a plain
// HTTP answer: a cursor that is not a non-negative integer is 400, and an address already holding
// its share of streams is 429. An admitted stream counts against its address until its TCP
// connection closes, whatever happens to the upgrade.
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { WebSocket } from 'ws'

export type Refusal = { status: 400 | 429; error: string; message: string }

export class StreamAdmission {
  private open = new Map<string, number>()
  private sockets = new WeakMap<IncomingMessage, WebSocket>()
  private connections = new WeakMap<IncomingMessage, Duplex>()

  constructor(private maxPerAddress: number) {}

  /** undefined when the stream may open (it is then counted), else why not */
  admit(req: IncomingMessage, socket: Duplex, address: string): Refusal | undefined {
    const bad = cursorProblem(req.url ?? '')
    if (bad) return { status: 400, error: 'InvalidRequest', message: bad }
    const n = this.open.get(address) ?? 0
    if (n >= this.maxPerAddress) {
      return { status: 429, error: 'RateLimitExceeded', message: `At most ${this.maxPerAddress} firehose connections per client address` }
    }
    this.open.set(address, n + 1)
    this.connections.set(req, socket)
    socket.once('close', () => {
      const left = (this.open.get(address) ?? 1) - 1
      if (left > 0) this.open.set(address, left)
      else this.open.delete(address)
    })
    return undefined
  }

  /** the upgraded socket of an admitted request, for the stream's handler */
  attach(req: IncomingMessage, ws: WebSocket) {
    this.sockets.set(req, ws)
  }

  socketOf(req: IncomingMessage): WebSocket | undefined {
    return this.sockets.get(req)
  }

  /** the TCP connection under that socket: frames written while it is corked leave in one write */
  connectionOf(req: IncomingMessage): Duplex | undefined {
    return this.connections.get(req)
  }
}

// xrpc-server reads `cursor=abc` as 0 (a full replay) and `1.5` as 1: the raw text decides here
function cursorProblem(url: string): string | undefined {
  const q = url.indexOf('?')
  if (q < 0) return undefined
  const values = new URLSearchParams(url.slice(q + 1)).getAll('cursor')
  if (!values.length) return undefined
  if (values.length > 1) return 'cursor must be given once'
  const v = values[0]
  // empty is no cursor, as xrpc-server reads it
  if (v === '') return undefined
  if (!/^[0-9]{1,16}$/.test(v) || !Number.isSafeInteger(Number(v))) return 'cursor must be a non-negative integer'
  return undefined
}
