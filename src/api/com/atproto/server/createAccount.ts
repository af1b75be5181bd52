// com.atproto.server.createAccount: a fresh account in status active, with a session; with `did`
// and `plcOp`, an account moving in (part 2 §4.9): deactivated, migrating-in, no repository yet.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { xrpcError } from '../../../../errors.js'
import { createFreshAccount } from '../../../../account/create.js'
import { createMigratingAccount } from '../../../../account/import-account.js'

export default (api: Server, deps: Services) =>
  api.com.atproto.server.createAccount(async ({ input }) => {
    const body = input.body
    let created: Awaited<ReturnType<typeof createFreshAccount>>
    if (body.plcOp !== undefined) {
      if (!body.did) throw xrpcError('InvalidRequest', 'plcOp needs the did it is for')
      created = await createMigratingAccount(deps, { ...body, did: body.did, plcOp: body.plcOp })
    } else if (body.did) {
      throw xrpcError('InvalidRequest', 'Creating an account for an existing DID needs a signed plcOp on this server')
    } else {
      created = await createFreshAccount(deps, body)
    }
    return {
      encoding: 'application/json',
      body: {
        did: created.did,
        handle: created.handle,
        accessJwt: created.tokens.accessJwt,
        refreshJwt: created.tokens.refreshJwt,
        didDoc: created.didDoc,
      },
    }
  })
