// The HTTP surface outside /xrpc/<method>: health, the service DID document, handle verification.
import { Router } from 'express'
import type { Services } from './context.js'
import { ping } from './db/index.js'
import { hostedHandleDid } from './account/handles.js'

export function wellKnownRoutes({ config, db }: Pick<Services, 'config' | 'db'>, version: string): Router {
  const r = Router()

  // `plc` tells a migration tool whether other servers can follow this server's DIDs: `directory`
  // (published to a PLC directory) or `local` (this server's own log, development only)
  const plc = config.plcUrl ? 'directory' : 'local'
  // a load balancer takes the process out of rotation when its database is gone
  r.get('/xrpc/_health', async (_req, res) => {
    try {
      await ping(db)
      res.json({ version, plc })
    } catch {
      res.status(503).json({ version, plc, error: 'ServiceUnavailable', message: 'Database unavailable' })
    }
  })

  r.get('/.well-known/did.json', (_req, res) => {
    res.json({
      '@context': ['https://www.w3.org/ns/did/v1'],
      id: config.serviceDid,
      service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: config.publicUrl }],
    })
  })

  r.get('/.well-known/atproto-did', async (req, res, next) => {
    try {
      const host = (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase()
      const did = host ? await hostedHandleDid(db, host) : undefined
      res.type('text/plain')
      if (!did) res.status(404).send('User not found')
      else res.send(did)
    } catch (err) {
      next(err)
    }
  })

  // Caddy's on-demand TLS asks here before getting a certificate for a name: only this host
  // and its hosted handles get one
  r.get('/tls-check', async (req, res, next) => {
    try {
      const domain = (typeof req.query.domain === 'string' ? req.query.domain : '').toLowerCase()
      const hosted = domain === config.hostname || (!!domain && !!(await hostedHandleDid(db, domain)))
      if (hosted) res.json({ success: true })
      else res.status(404).json({ error: 'NotFound', message: 'Not a handle on this server' })
    } catch (err) {
      next(err)
    }
  })

  return r
}
