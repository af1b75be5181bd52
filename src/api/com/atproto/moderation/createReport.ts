// com.atproto.moderation.createReport: forwarded for the reporter to the service an
// `atproto-proxy` header names, else to PDS_REPORT_SERVICE_* (else the moderation service), with
// a service token for this method. A taken-down account may report (its row admits it).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { forwardCall } from '../../../../proxy/call.js'
import { targetOf } from '../../../../proxy/targets.js'

export default (api: Server, deps: Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger' | 'didResolver'>) =>
  api.com.atproto.moderation.createReport<AuthFor<'com.atproto.moderation.createReport'>>(async ({ auth, input, req }) => {
    const nsid = 'com.atproto.moderation.createReport'
    const target = await targetOf(nsid, req.headers['atproto-proxy'], deps)
    if (!target) throw xrpcError('InvalidRequest', 'No service configured for com.atproto.moderation.createReport')
    return forwardCall(deps, { target, nsid, iss: auth.credentials.did, body: input.body, headers: req.headers })
  })
