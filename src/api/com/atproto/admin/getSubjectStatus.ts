// com.atproto.admin.getSubjectStatus: an account's takedown and deactivation state, or the
// takedown state of one record (uri) or blob (did and blob).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { accountByDid, subjectStatus } from '../../../../account/admin-views.js'
import { blobStatus, recordStatus } from '../../../../repo/takedowns.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.getSubjectStatus<AuthFor<'com.atproto.admin.getSubjectStatus'>>(async ({ params }) => {
    const { did, uri, blob } = params
    let body
    if (blob) {
      if (!did) throw xrpcError('InvalidRequest', 'A blob subject needs the did of its repository')
      body = await blobStatus(db, did, blob)
    } else if (uri) body = await recordStatus(db, uri)
    else if (did) body = subjectStatus(await accountByDid(db, did))
    else throw xrpcError('InvalidRequest', 'Name a subject: did, uri, or did and blob')
    return { encoding: 'application/json', body }
  })
