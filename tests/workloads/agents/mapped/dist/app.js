"use strict";
const fs=require("fs");function readConfig(path){return fs.readFileSync(path,"utf8")}const path=process.argv[2];for(let i=0;i<20;i++){readConfig(path)}
//# sourceMappingURL=data:application/json;base64,eyJ2ZXJzaW9uIjozLCJzb3VyY2VzIjpbIi4uL3NyYy9hcHAudHMiXSwibmFtZXMiOltdLCJtYXBwaW5ncyI6IjtBQUdBLHVCQUVBLDBCQUNFLE9BQU8sNEJBQ1QsQ0FFQSwyQkFDQSxzQkFDRSxnQkFDRiJ9
