// com.atproto.identity.resolveDid for DIDs hosted here: rendered from the local operation log, or
// read from the PLC directory in PDS_DID_PLC_URL mode.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { didDocFor } from '../../../../account/store.js'
import { xrpcError } from '../../../../errors.js'
import { resolveFromDirectory } from '../../../../identity/directory.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.identity.resolveDid(async ({ params }) => {
    const account = await db.selectFrom('account').select('status').where('did', '=', params.did).executeTakeFirst()
    if (!account || account.status === 'deleted') throw xrpcError('DidNotFound', `DID not found: ${params.did}`)
    if (account.status === 'takendown') throw xrpcError('DidDeactivated', `DID is deactivated: ${params.did}`)
    const doc =
      config.plcUrl && params.did.startsWith('did:plc:')
        ? await resolveFromDirectory(config.plcUrl, params.did)
        : await didDocFor(db, params.did)
    if (!doc) throw xrpcError('DidNotFound', `DID not found: ${params.did}`)
    return { encoding: 'application/json', body: { didDoc: doc as unknown as { [k: string]: unknown } } }
  })
