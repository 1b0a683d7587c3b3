plugins { application }
