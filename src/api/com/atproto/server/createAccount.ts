// com.atproto.server.createAccount: a fresh account in status active, with a session.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { xrpcError } from '../../../../errors.js'
import { createFreshAccount } from '../../../../account/create.js'

export default (api: Server, deps: Services) =>
  api.com.atproto.server.createAccount(async ({ input }) => {
    const body = input.body
    if (body.did || body.plcOp) {
      throw xrpcError('InvalidRequest', 'Creating an account for an existing DID is not accepted by this server')
    }
    const created = await createFreshAccount(deps, body)
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
