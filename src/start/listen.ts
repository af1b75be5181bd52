// The HTTP listener with the request limits (slowloris timeouts, header size), its WebSocket
// upgrades, and its drain at shutdown.
import type { Server as HttpServer } from 'node:http'
import type { Duplex } from 'node:stream'
import type express from 'express'
import type { Server as XrpcServer } from '@atproto/xrpc-server'
import { clientAddress } from '../auth/rate-limits.js'
import { streamServers } from '../patches/xrpc-server.js'
import type { Refusal, StreamAdmission } from '../sequencer/admission.js'
import { SHUTDOWN, type HttpLimits } from '../limits.js'
import { http } from '../node-http.js'

// Upgrades go to the XRPC subscriptions, as xrpc-server's own listen hook would route them.
export async function listen(
  app: express.Express,
  streams: { xrpc: XrpcServer; admission: StreamAdmission } | undefined,
  port: number,
  bind: string,
  limits: HttpLimits,
): Promise<HttpServer> {
  const server = http.createServer(
    {
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    app,
  )
  if (streams) {
    const subs = streamServers(streams.xrpc)
    server.on('upgrade', (req, socket, head) => {
      const nsid = req.url?.match(/^\/xrpc\/([^?/]+)/)?.[1]
      const sub = nsid ? subs.get(nsid) : undefined
      if (!sub) return socket.destroy()
      socket.on('error', () => {})
      // express's request methods, as every other request gets them: req.ip is the address the
      // rate limits count, under the same proxy trust
      Object.setPrototypeOf(req, app.request)
      const refused = streams.admission.admit(req, socket, clientAddress(req))
      if (refused) return refuseUpgrade(socket, refused)
      sub.wss.handleUpgrade(req, socket, head, (ws) => {
        streams.admission.attach(req, ws)
        sub.wss.emit('connection', ws, req)
      })
    })
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, bind, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return server
}

/** an HTTP error instead of the upgrade: the client has no WebSocket to read an error frame from */
function refuseUpgrade(socket: Duplex, { status, error, message }: Refusal) {
  const body = JSON.stringify({ error, message })
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    () => socket.destroy(),
  )
}

/** stops accepting and lets requests in flight finish, cutting off what is left after the drain time */
export async function drain(server: HttpServer, xrpc: XrpcServer) {
  const done = new Promise<void>((resolve) => server.close(() => resolve()))
  closeStreams(xrpc)
  // keep-alive connections turn idle as their last response ends: close them as they do
  const sweep = setInterval(() => server.closeIdleConnections(), SHUTDOWN.idleSweepMs)
  const timer = setTimeout(() => server.closeAllConnections(), SHUTDOWN.drainMs)
  await done
  clearInterval(sweep)
  clearTimeout(timer)
}

// WebSocket subscribers are not the HTTP server's connections any more: say goodbye to each
// (1001, going away), and cut off any that do not finish the close handshake in time.
function closeStreams(xrpc: XrpcServer) {
  for (const { wss } of streamServers(xrpc).values()) {
    for (const ws of wss.clients) ws.close(1001, 'server shutting down')
    setTimeout(() => wss.clients.forEach((ws) => ws.terminate()), SHUTDOWN.wsCloseMs).unref()
  }
}
