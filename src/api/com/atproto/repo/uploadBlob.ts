// com.atproto.repo.uploadBlob: streamed to the blob store under PDS_BLOB_UPLOAD_LIMIT (413 beyond);
// the MIME type is the request's.
import { BlobRef } from '@atproto/lexicon'
import { CID } from 'multiformats/cid'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { storeUpload } from '../../../../repo/blobs.js'
import { decodedBody } from '../../../request-body.js'

export default (api: Server, deps: Pick<Services, 'db' | 'blobstore' | 'config'>) =>
  api.com.atproto.repo.uploadBlob<AuthFor<'com.atproto.repo.uploadBlob'>>(async ({ auth, input, req }) => {
    const header = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase()
    const mimeType = header && header !== '*/*' ? header : 'application/octet-stream'
    const blob = await storeUpload(deps, auth.credentials.did, decodedBody(req, input.body), mimeType, deps.config.blobUploadLimit)
    return {
      encoding: 'application/json',
      body: { blob: new BlobRef(CID.parse(blob.cid), blob.mimeType, blob.size) },
    }
  })
