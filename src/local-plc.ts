// Without a PLC directory (development, or PDS_DID_PLC_URL=local) DIDs live in this server's own
// log, which no one else can resolve: the server answers the directory's reads for them itself,
// at the paths and in the shapes plc.directory uses, so an app's OAuth client can be pointed here.
import type { RequestHandler, Response } from 'express'
import type { Db } from './db/index.js'
import { opLog, renderDidDoc, type SignedPlcOp } from './identity/plc.js'

// the directory's read paths; the client asks for `/${encodeURIComponent(did)}`
const READ = /^\/([^/]+)(\/data|\/log|\/log\/audit|\/log\/last)?$/

/** whether `path` is one of the reads below (for the CORS headers browsers need) */
export function isPlcRead(path: string): boolean {
  const m = READ.exec(path)
  return !!m && /^did(:|%3a)plc(:|%3a)/i.test(m[1])
}

export function localPlcRoutes({ db }: { db: Db }): RequestHandler {
  return (req, res, next) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next()
    const m = READ.exec(req.path)
    if (!m) return next()
    let did: string
    try {
      did = decodeURIComponent(m[1])
    } catch {
      return next()
    }
    if (!did.startsWith('did:plc:')) return next()
    answer(db, did, m[2], res).catch(next)
  }
}

async function answer(db: Db, did: string, read: string | undefined, res: Response) {
  const log = await opLog(db, did)
  // plc.directory's error body is a bare message
  if (!log.length) return void res.status(404).json({ message: `DID not registered: ${did}` })
  const ops = log.map((row) => JSON.parse(row.operation) as SignedPlcOp)
  const last = ops[ops.length - 1]
  switch (read) {
    case undefined:
      res.type('application/did+ld+json').send(JSON.stringify(renderDidDoc(did, last)))
      return
    case '/data': {
      const { verificationMethods, rotationKeys, alsoKnownAs, services } = last
      res.json({ did, verificationMethods, rotationKeys, alsoKnownAs, services })
      return
    }
    case '/log':
      res.json(ops)
      return
    case '/log/audit':
      // this log never forks, so nothing in it is nullified
      res.json(
        log.map((row, i) => ({
          did,
          operation: ops[i],
          cid: row.cid,
          nullified: false,
          createdAt: new Date(row.created_at).toISOString(),
        })),
      )
      return
    default:
      res.json(last)
  }
}
