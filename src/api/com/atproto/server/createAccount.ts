// com.atproto.server.createAccount: a fresh account in status active, with a session; with `did`
// and a `plcOp` that proves control of the DID, an account moving in: deactivated, migrating-in,
// no repository yet; with `did` and a service-auth JWT the DID's current key signed (the verifier
// checked it), the standard atproto migration's account moving in, likewise deactivated. Who may
// create which is PDS_ACCOUNT_CREATION's (account/creation-policy.ts); admin Basic is not bound by it.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { createFreshAccount } from '#src/account/create.js'
import { createMigratingAccount, createServiceAuthAccount } from '#src/account/import-account.js'

export default method('com.atproto.server.createAccount', (deps) => async ({ auth, input }) => {
  const body = input.body
  let created: Omit<Awaited<ReturnType<typeof createFreshAccount>>, 'didDoc'> & { didDoc?: { [x: string]: unknown } }
  if (body.plcOp !== undefined) {
    if (!body.did) throw xrpcError('InvalidRequest', 'plcOp needs the did it is for')
    created = await createMigratingAccount(deps, { ...body, did: body.did, plcOp: body.plcOp })
  } else if (body.did) {
    if (auth.credentials.type !== 'service') {
      throw xrpcError(
        'InvalidRequest',
        'Creating an account for an existing DID needs a signed plcOp or a service auth token from its current server',
      )
    }
    created = await createServiceAuthAccount(deps, { ...body, did: body.did }, auth.credentials.iss)
  } else if (auth.credentials.type === 'admin') {
    // the operator creates accounts whatever PDS_ACCOUNT_CREATION says, as the CLI does
    created = await createFreshAccount({ ...deps, config: { ...deps.config, accountCreation: 'open' } }, body)
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
